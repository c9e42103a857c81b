#!/usr/bin/env bash
# Builds moequant and shows it working: the plugin registry and `inspect` on the sharded
# safetensors fixture shipped in ../shared (header-only inspection, index-driven shard lookup).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${MOEQUANT_SHARED_DIR:-$root/../shared}
[[ -d "$shared" ]] && shared=$(cd "$shared" && pwd)
build=${MOEQUANT_DEMO_BUILD_DIR:-$root/build-demo}

"$root/scripts/install-deps.sh"
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DMOEQUANT_BUILD_TESTS=OFF -DMOEQUANT_BUILD_BENCH=OFF \
  "-DMOEQUANT_SHARED_DIR=$shared" >/dev/null
cmake --build "$build" --parallel "$(nproc)"
moequant="$build/bin/moequant"

fixture="$shared/fixtures/third_party/safetensors_jl_testdata/sharded"
if [[ ! -d "$fixture" ]]; then
  echo "demo: the shared fixtures are not at $shared (set MOEQUANT_SHARED_DIR)" >&2
  exit 1
fi

run() { echo; echo "\$ moequant $*"; "$moequant" "$@"; }
run --version
run plugins --all
run inspect "$fixture"
run inspect --top 3 "$shared/fixtures/third_party/safetensors_jl_testdata/non_sharded/model.with_metadata.safetensors"
echo
echo "\$ moequant inspect <the 88-byte abuse file>   (must be refused with one clear line)"
if "$moequant" inspect "$shared/fixtures/third_party/safetensors_cpp_testdata/test/safetensors_abuse_attempt_1.safetensors"; then
  echo "demo: the abuse file was accepted" >&2
  exit 1
else
  echo "(exit code $?)"
fi
