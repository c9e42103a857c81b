#!/bin/sh
# Builds ggml's libggml-base at the pinned commit with its default flags and runs make_vectors.c
# against it. usage: make_vectors.sh GGML_CHECKOUT OUT_DIR   (GGML_CHECKOUT: ggml-org/ggml at the
# commit README.md names)
set -eu
ggml=$(cd "$1" && pwd); out=$2; here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
cmake -S "$ggml" -B "$ggml/build-golden" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=ON >/dev/null
cmake --build "$ggml/build-golden" --target ggml-base -j2 >/dev/null
cc -O2 -std=c11 -I"$ggml/include" "$here/make_vectors.c" -L"$ggml/build-golden/src" -lggml-base -lm -o "$ggml/build-golden/make_vectors"
LD_LIBRARY_PATH="$ggml/build-golden/src" "$ggml/build-golden/make_vectors" "$out"
