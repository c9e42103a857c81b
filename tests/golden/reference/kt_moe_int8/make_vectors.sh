#!/usr/bin/env bash
# Rebuild the kt MOE_INT8 golden vectors in tests/golden/data/kt-moe-int8/.
#
# usage: make_vectors.sh KT_GIT BLIS_GIT LLAMA_GIT [OUT_DIR]
#   KT_GIT     ktransformers git dir (bare or checkout)      commit $KT_COMMIT
#   BLIS_GIT   amd/blis (AOCL-BLAS) git dir                  commit $BLIS_COMMIT
#   LLAMA_GIT  ggerganov/llama.cpp git dir; the commit is the one kt records for its
#              third_party/llama.cpp submodule (only ggml.h is used, for ggml_bf16_t)
#   OUT_DIR    default: <this repo>/tests/golden/data/kt-moe-int8
# environment:
#   AOCL_PREFIX  an installed AOCL-BLAS (>= 5.0, with the aocl_gemm addon) to use instead of
#                building one from BLIS_GIT
#   WORK         scratch dir (default: mktemp -d)
#   JOBS         make parallelism for the AOCL build (default 2); everything runs under nice
#   BLIS_CONFIG  AOCL configure target (default zen4; amdzen also works)
#   CXX          default g++
# Needs an x86-64 CPU with AVX512-VNNI (AOCL's s8s8s32 reorder does nothing elsewhere).
set -euo pipefail

KT_COMMIT=${KT_COMMIT:-95009ea6856c0799e517e93cb12be5e8494bc7ce}
BLIS_COMMIT=${BLIS_COMMIT:-ad6a372abfaeaafae730b9534aadbe2e36938344}
JOBS=${JOBS:-2}
BLIS_CONFIG=${BLIS_CONFIG:-zen4}
CXX=${CXX:-g++}
HERE=$(cd "$(dirname "$0")" && pwd)

[ $# -ge 3 ] || { sed -n 2,20p "$0"; exit 2; }
KT_GIT=$1; BLIS_GIT=$2; LLAMA_GIT=$3
OUT=${4:-$HERE/../../data/kt-moe-int8}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK" "$OUT"
OUT=$(cd "$OUT" && pwd)

grep -q avx512_vnni /proc/cpuinfo || { echo "error: this CPU lacks avx512_vnni" >&2; exit 1; }

# --- sources -------------------------------------------------------------------------------
rm -rf "$WORK/kt" "$WORK/third_party"
mkdir -p "$WORK/kt" "$WORK/third_party/llama.cpp"
git -C "$KT_GIT" archive "$KT_COMMIT" kt-kernel/operators/moe_kernel | tar -x -C "$WORK/kt"
LLAMA_COMMIT=$(git -C "$KT_GIT" ls-tree "$KT_COMMIT" third_party/llama.cpp | awk '{print $3}')
git -C "$LLAMA_GIT" show "$LLAMA_COMMIT:ggml.h" > "$WORK/third_party/llama.cpp/ggml.h"

# --- AOCL-BLAS -----------------------------------------------------------------------------
AOCL_PREFIX_GIVEN=${AOCL_PREFIX:+1}
if [ -z "${AOCL_PREFIX:-}" ]; then
  AOCL_PREFIX=$WORK/aocl-prefix
  rm -rf "$WORK/blis"; mkdir -p "$WORK/blis"
  git -C "$BLIS_GIT" archive "$BLIS_COMMIT" | tar -x -C "$WORK/blis"
  ( cd "$WORK/blis" &&
    nice -n 19 ./configure --prefix="$AOCL_PREFIX" -a aocl_gemm --enable-threading=no \
        --disable-shared --enable-static "$BLIS_CONFIG" > configure.log &&
    nice -n 19 make -j"$JOBS" > make.log 2>&1 && make install > install.log 2>&1 )
fi
BLIS_LIB=$(ls "$AOCL_PREFIX"/lib/libblis*.a 2>/dev/null | head -1 || true)
[ -n "$BLIS_LIB" ] || BLIS_LIB=$(ls "$AOCL_PREFIX"/lib/libblis*.so | head -1)

# --- driver: our code + kt's kernel.hpp + kt's AOCL wrapper + libblis -------------------------
# Flags as kt-kernel's CMakeLists.txt (C++20, -O3 -ffast-math, -march=native, USE_MOE_KERNEL_AMD).
CXXFLAGS="-std=c++20 -O3 -ffast-math -march=native -DUSE_MOE_KERNEL=1 -DUSE_MOE_KERNEL_AMD=1"
INC="-I$WORK/kt/kt-kernel -I$WORK/third_party -I$AOCL_PREFIX/include -I$AOCL_PREFIX/include/blis"
nice -n 19 $CXX $CXXFLAGS $INC -c "$WORK/kt/kt-kernel/operators/moe_kernel/mat_kernel/aocl_kernel/kernel.cpp" \
    -o "$WORK/kt_aocl_kernel.o"
nice -n 19 $CXX $CXXFLAGS $INC -c "$HERE/moe_int8_reference.cpp" -o "$WORK/moe_int8_reference.o"
nice -n 19 $CXX -o "$WORK/moe_int8_reference" "$WORK/moe_int8_reference.o" "$WORK/kt_aocl_kernel.o" \
    "$BLIS_LIB" -lm -lpthread

# --- cases: name class n k seed NB ----------------------------------------------------------
CASES="u_n64_k256  u 64  256  1 32
u_n32_k100  u 32  100  2 32
d_n128_k96  d 128 96   3 64
d_n64_k130  d 64  130  4 64
u_n32_k2048 u 32  2048 5 32"
rm -f "$OUT"/*.input.bf16 "$OUT"/*.weight.bin "$OUT"/*.scale.bin "$OUT"/cases.json
echo "$CASES" | while read -r name cls n k seed nb; do
  "$WORK/moe_int8_reference" "$OUT" "$name" "$cls" "$n" "$k" "$seed" "$nb"
done

BLIS_DESC=$BLIS_COMMIT; [ -n "${AOCL_PREFIX_GIVEN:-}" ] && BLIS_DESC="$BLIS_COMMIT (prebuilt AOCL_PREFIX; commit not checked)"
CASES="$CASES" OUT="$OUT" KT_COMMIT="$KT_COMMIT" BLIS_COMMIT="$BLIS_DESC" LLAMA_COMMIT="$LLAMA_COMMIT" \
CPU="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" python3 - <<'EOF'
import hashlib, json, os
out = os.environ["OUT"]
cases = []
for line in os.environ["CASES"].strip().splitlines():
    name, cls, n, k, seed, nb = line.split()
    files = {}
    for kind, suffix in (("input", ".input.bf16"), ("weight", ".weight.bin"), ("scale", ".scale.bin")):
        b = open(os.path.join(out, name + suffix), "rb").read()
        files[kind] = {"path": name + suffix, "bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()}
    cases.append({"name": name, "class": cls, "n": int(n), "k": int(k), "NB": int(nb), "seed": int(seed),
                  "nth": int(n) // int(nb), "files": files})
doc = {
    "format": "kt-kernel MOE_INT8 (GemmKernelInt8::BufferB, PACKED, !PLAIN): weight = nth AOCL "
              "s8s8s32os32 reordered blocks ('c','n','B', k, NB, ldb=k); scale = n float32 LE",
    "generator": "moe_int8_reference.cpp (splitmix64 counter-based; see the comment at its top)",
    "ktransformers_commit": os.environ["KT_COMMIT"],
    "aocl_blis_commit": os.environ["BLIS_COMMIT"],
    "llama_cpp_commit_for_ggml_h": os.environ["LLAMA_COMMIT"],
    "cpu": os.environ["CPU"],
    "cases": cases,
}
with open(os.path.join(out, "cases.json"), "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
EOF
python3 "$HERE/verify_vectors.py" "$OUT" ${REF_PY:+--ref-py "$REF_PY"}
