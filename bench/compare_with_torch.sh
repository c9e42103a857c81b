#!/usr/bin/env bash
# moequant's GPTQ and calibration-forward benches against torch, measured on this machine in the
# same run: bench/torch_reference.py times llm-compressor's Hessian and quantize_weight on one
# 2048 x 7168 weight with 4096 tokens, and one DeepSeek-V3-shaped layer's forward in float32 and
# with bfloat16 matmuls; the C++ benches then print their times as ratios to those.
# Installs Debian's python3-torch when it is missing (this bench's own setup; tests never need it).
#
# Usage: bench/compare_with_torch.sh [BUILD_DIR] [THREADS]   (defaults: build, 2)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build}"
threads="${2:-2}"
tokens=1024
experts=16
python=/usr/bin/python3  # Debian's, where python3-torch installs
if ! "$python" -c 'import torch' 2>/dev/null; then
  sudo=()
  [[ $(id -u) -ne 0 ]] && sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-torch python3-numpy
fi
# torch's FP32 products go to whatever libblas.so.3 the system points at; on the build machine
# that is BLIS's serial build, which runs its generic kernels on Zen 5 and one thread (Hessian
# 15 s against 3.9 s on OpenBLAS). Give torch Debian's threaded OpenBLAS instead, on the
# bench's threads and, with AVX-512, its AVX-512 kernels (it picks Haswell's for Zen 5): the
# same courtesy moequant's BLIS gets (docs/speed.md).
openblas=/usr/lib/x86_64-linux-gnu/openblas-pthread
if [[ ! -e "$openblas/libblas.so.3" ]]; then
  sudo=()
  [[ $(id -u) -ne 0 ]] && sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libopenblas0-pthread
fi
torch_env=(LD_LIBRARY_PATH="$openblas" OPENBLAS_NUM_THREADS="$threads")
grep -qw avx512f /proc/cpuinfo && torch_env+=(OPENBLAS_CORETYPE=SkylakeX)
times="$(mktemp --suffix=.json)"
trap 'rm -f "$times"' EXIT
echo "== torch (same run; ${torch_env[*]}) =="
env "${torch_env[@]}" "$python" "$here/torch_reference.py" "$times" --threads "$threads" --tokens "$tokens" --experts "$experts"
echo
echo "== moequant_gptq_bench =="
"$build/bin/moequant_gptq_bench" --threads "$threads" --experts 0 --torch "$times"
echo
echo "== moequant_calibration_forward_bench =="
"$build/bin/moequant_calibration_forward_bench" --threads "$threads" --tokens "$tokens" --experts "$experts" --torch "$times"
