#!/usr/bin/env bash
# llama-quantize's GGUFs as moequant's sources (docs/gguf-source.md; issue 39): for each
# synthesized family, moequant writes the BF16 GGUF, llama-quantize quantizes it to each preset,
# and moequant reads llama-quantize's file
#   - to AMX INT4 straight (convert -i FILE.gguf --quant-method int4), and
#   - to its BF16 twin (--format bf16-safetensors), which is converted to AMX INT4 in turn;
# the two AMX outputs must be the same bytes (every file but the run manifest). It also checks
# that the twin's tensors are the source checkpoint's names and shapes, and runs eval of the
# source against llama-quantize's file (its experts as the CPU weights). Developer check, not CI:
# it needs a llama.cpp build (check_llama_cpp.sh makes one). Exits 1 on a difference.
set -euo pipefail

usage() {
  cat <<EOF
usage: $(basename "$0") --work DIR --llama-bin DIR [--moequant BIN] [--families "F:DTYPE ..."] [--presets "P ..."]

  --work DIR        where models and logs go
  --llama-bin DIR   a llama.cpp build's bin/ holding llama-quantize
  --moequant BIN    moequant binary (default: moequant on PATH)
  --families "..."  synth families, source dtypes and optionally synth's size preset (FAMILY:DTYPE[:PRESET];
                    default: "qwen3_moe:bf16 deepseek_v3:fp8 mixtral:bf16 glm4_moe:bf16 minimax_m2:fp8
                    deepseek_v32:fp8 glm_moe_dsa:bf16:small")
  --presets "..."   llama-quantize presets (default: "Q4_K_M Q8_0 Q6_K IQ4_XS Q2_K")
EOF
}

work='' bin='' moequant=moequant families="qwen3_moe:bf16 deepseek_v3:fp8 mixtral:bf16 glm4_moe:bf16 minimax_m2:fp8 deepseek_v32:fp8 glm_moe_dsa:bf16:small" presets="Q4_K_M Q8_0 Q6_K IQ4_XS Q2_K"
while (($#)); do
  case $1 in
    --work) work=$2; shift 2 ;;
    --llama-bin) bin=$2; shift 2 ;;
    --moequant) moequant=$2; shift 2 ;;
    --families) families=$2; shift 2 ;;
    --presets) presets=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
[[ -n $work && -x $bin/llama-quantize ]] || { usage >&2; exit 2; }
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
same_outputs() {  # two output folders: every file but the run manifest equal
  local a=$1 b=$2 f
  for f in "$a"/*; do
    [[ $(basename "$f") == moequant-run.json ]] && continue
    cmp -s "$f" "$b/$(basename "$f")" || { echo "differs: $(basename "$f")"; return 1; }
  done
}

echo "family | preset | AMX INT4 from llama-quantize's GGUF vs from its BF16 twin | eval KL (source vs its experts)"
for spec in $families; do
  IFS=: read -r family dtype size <<< "$spec"
  dir=$work/$family-$dtype
  rm -rf "$dir" && mkdir -p "$dir"
  "$moequant" synth --family "$family" --dtype "$dtype" --preset "${size:-tiny}" --out "$dir/src" > /dev/null
  "$moequant" convert -i "$dir/src" -o "$dir/bf16" --format gguf --quant-method BF16 -q > /dev/null
  first=$(ls "$dir"/bf16/*-00001-of-*.gguf | head -1)
  for preset in $presets; do
    mkdir -p "$dir/lq-$preset"  # the GGUF's folder is the source: outputs go beside it
    q=$dir/lq-$preset/model-$preset.gguf
    "$bin/llama-quantize" "$first" "$q" "$preset" > "$dir/quantize-$preset.log" 2>&1
    "$moequant" convert -i "$q" -o "$dir/amx-$preset" --quant-method int4 -q > /dev/null
    "$moequant" convert -i "$q" -o "$dir/twin-$preset" --format bf16-safetensors -q > /dev/null
    "$moequant" convert -i "$dir/twin-$preset" -o "$dir/amx-twin-$preset" --quant-method int4 -q > /dev/null
    if same_outputs "$dir/amx-$preset" "$dir/amx-twin-$preset" > "$dir/compare-$preset.log"; then verdict="same bytes"; else verdict="DIFFERENT ($(cat "$dir/compare-$preset.log"))"; status=1; fi
    kl=$("$moequant" eval --model_id "$dir/src" --cpu-weights "$q" --dataset embedded --num_calibration_samples 4 \
         --max_sequence_length 64 --json -q | python3 -c 'import json,sys; print(json.load(sys.stdin)["kl_mean"])')
    echo "$family ($dtype) | $preset | $verdict | $kl"
  done
done
echo "llama.cpp build: $bin"
exit $status
