#!/bin/sh
# moequant's GGUF container read by ggml's own reader: write_sample (moequant's code) writes a
# file at alignments 32 and 64 and lists it, read_with_ggml (ggml's gguf_init_from_file, data
# loaded) lists what it finds; the two listings must be identical.
# usage: check_with_ggml.sh GGML_CHECKOUT MOEQUANT_SOURCE MOEQUANT_BUILD WORK
#   GGML_CHECKOUT: ggml-org/ggml (with build-golden/ from ../ggml_quants/make_vectors.sh);
#   MOEQUANT_BUILD: a configured and built moequant tree (its lib/libmoequant_sdk.so).
set -eu
ggml=$1 src=$2 build=$3 work=$4 here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
cmake --build "$ggml/build-golden" --target ggml-base -j2 >/dev/null 2>&1 || {
  cmake -S "$ggml" -B "$ggml/build-golden" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=ON >/dev/null
  cmake --build "$ggml/build-golden" --target ggml-base -j2 >/dev/null; }
g++ -std=c++20 -O1 -I"$src/formats/gguf" -I"$src/core/sdk/include" -I"$build/core/sdk/include" "$here/write_sample.cpp" \
  "$src/formats/gguf/gguf_container.cpp" -L"$build/lib" -lmoequant_sdk -Wl,-rpath,"$build/lib" -o "$work/write_sample"
cc -std=c11 -O1 -I"$ggml/include" "$here/read_with_ggml.c" -L"$ggml/build-golden/src" -lggml-base -Wl,-rpath,"$ggml/build-golden/src" \
  -o "$work/read_with_ggml"
status=0
for alignment in 32 64; do
  "$work/write_sample" "$work/sample-$alignment.gguf" "$alignment" > "$work/written-$alignment.txt"
  "$work/read_with_ggml" "$work/sample-$alignment.gguf" > "$work/read-$alignment.txt"
  if diff -u "$work/written-$alignment.txt" "$work/read-$alignment.txt"; then
    echo "alignment $alignment: ggml reads every key, value and tensor as written ($(grep -c '^kv' "$work/read-$alignment.txt") keys, $(grep -c '^tensor' "$work/read-$alignment.txt") tensors)"
  else status=1; fi
done
exit $status
