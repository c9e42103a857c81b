#!/usr/bin/env bash
# Builds moequant and shows it working on its embedded default: `synth` writes a tiny
# DeepSeek-V3-style FP8 checkpoint in the family's real on-disk conventions, `inspect` reads it
# back (headers, detected family, MoE plan), `convert` turns its experts into kt-kernel's AMX
# INT4/INT8 format and `verify` proves the result against the source. Nothing is downloaded.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${MOEQUANT_SHARED_DIR:-$root/../shared}
[[ -d "$shared" ]] && shared=$(cd "$shared" && pwd)
build=${MOEQUANT_DEMO_BUILD_DIR:-$root/build-demo}

"$root/scripts/install-deps.sh"
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# The build's output goes to a log; the screen shows one line, then only moequant's output.
mkdir -p "$build"
log="$build/demo-build.log"
start=$SECONDS
printf 'demo: building moequant (log: %s) ... ' "$log"
if ! { cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
         -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DMOEQUANT_BUILD_TESTS=OFF -DMOEQUANT_BUILD_BENCH=OFF \
         "-DMOEQUANT_SHARED_DIR=$shared" && cmake --build "$build" --parallel "$(nproc)"; } >"$log" 2>&1; then
  echo "failed"
  echo "demo: the build log, $log:" >&2
  cat "$log" >&2
  exit 1
fi
echo "done ($((SECONDS - start)) s)"
moequant="$build/bin/moequant"

work=$(mktemp -d "${TMPDIR:-/tmp}/moequant-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT

run() { echo; echo "\$ moequant $*"; "$moequant" "$@"; }
run --version
run plugins
# The embedded default: a tiny DeepSeek-V3-style checkpoint with FP8 block-scaled experts,
# synthesized by the deepseek_v3 adapter, then inspected (headers, family, MoE plan).
run synth --family deepseek_v3 --dtype fp8 --out "$work/deepseek-v3-tiny"
run inspect --top 5 "$work/deepseek-v3-tiny"
# The main job: the routed experts into kt-kernel's AMX INT4 layout (FP8 dequantized on the
# CPU), merged safetensors with one shard per layer, then the same as the .kt file tree.
run convert -i "$work/deepseek-v3-tiny" -o "$work/deepseek-v3-tiny-int4" --input-type fp8 --quant-method int4 --threadpool-count 2
run inspect --headers-only --top 4 "$work/deepseek-v3-tiny-int4"
run convert -i "$work/deepseek-v3-tiny" -o "$work/deepseek-v3-tiny-int8-tree" --quant-method int8 --no-merge-safetensor --quiet
echo; echo "\$ ls <tree>/_layer_1/_numa_0 | head -4"; ls "$work/deepseek-v3-tiny-int8-tree/_layer_1/_numa_0" | head -4
echo; echo "\$ moequant convert ... (the same command again: the completed layers are kept)"
"$moequant" convert -i "$work/deepseek-v3-tiny" -o "$work/deepseek-v3-tiny-int4" --input-type fp8 --quant-method int4 --quiet
# Proof: every part decoded from its packed bytes (and multiplied straight from the tiles)
# against the source, within the quantizer's bound; then merged vs tree of the same method.
run verify --source "$work/deepseek-v3-tiny" --converted "$work/deepseek-v3-tiny-int4" --gemv --worst 3 --quiet
run convert -i "$work/deepseek-v3-tiny" -o "$work/deepseek-v3-tiny-int4-tree" --quant-method int4 --no-merge-safetensor --quiet
run verify "$work/deepseek-v3-tiny-int4" "$work/deepseek-v3-tiny-int4-tree"

# The GPU path: GPTQ W4A16 calibrated on text (the embedded public-domain text, tokenized with the
# model's tokenizer and run through its layers on the CPU, each layer seeing the quantized ones
# before it) into a compressed-tensors checkpoint vLLM/SGLang load; then verify with each part's
# output error on the calibration inputs next to RTN's, and place GPU experts by router statistics.
run gptq --model_id "$work/deepseek-v3-tiny" --output_dir "$work/deepseek-v3-tiny-gptq" --quant_method GPTQ --quant_type W4A16 --dataset embedded --save-activations "$work/calibration.safetensors" --quiet
run verify --source "$work/deepseek-v3-tiny" --converted "$work/deepseek-v3-tiny-gptq" --calibration-activations "$work/calibration.safetensors" --worst 3 --quiet
run plan --model_id "$work/deepseek-v3-tiny" --activations "$work/calibration.safetensors" --num-gpu-experts 4

fixture="$shared/fixtures/third_party/safetensors_cpp_testdata/test/safetensors_abuse_attempt_1.safetensors"
if [[ -f "$fixture" ]]; then
  echo
  echo "\$ moequant inspect <the 88-byte abuse file of the safetensors project>   (refused with one clear line)"
  if "$moequant" inspect "$fixture"; then
    echo "demo: the abuse file was accepted" >&2
    exit 1
  else
    echo "(exit code $?)"
  fi
fi
