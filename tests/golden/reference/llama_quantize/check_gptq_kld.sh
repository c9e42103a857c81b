#!/usr/bin/env bash
# llama.cpp's own measure of `convert --format gguf --calibrate --gptq` (docs/gguf-gptq.md): for
# each synthesized family and preset, plain, with the importance matrix measured on the embedded text
# (--calibrate) and with GPTQ codes on the same recorded inputs (--calibrate --gptq), each against
# the family's BF16 GGUF by llama-perplexity --kl-divergence on a text no calibration saw. Every
# tensor runs through llama.cpp's loader and its quantized dot products. Every tensor but the
# routed experts is kept BF16 in all three (--tensor-type), so that the KLD measures the experts'
# codes, not the attention's quantization shared by all three. Prints one row per
# family, preset and file; exits 1 when GPTQ's mean KLD is not below the importance matrix's.
set -euo pipefail

usage() {
  cat <<EOF
usage: $(basename "$0") --work DIR --llama-bin DIR [--moequant BIN] [--families "F:DTYPE ..."] [--presets "P ..."]
       [--statistics S] [--text FILE]

  --work DIR        where models, logs and the base logits go
  --llama-bin DIR   a llama.cpp build's bin/ holding llama-perplexity (check_llama_cpp.sh builds one)
  --moequant BIN    moequant binary (default: moequant on PATH)
  --families "..."  synth families and source dtypes (default: "qwen3_moe:bf16 deepseek_v3:fp8 mixtral:bf16")
  --presets "..."   llama-quantize presets (default: "Q4_K_M")
  --statistics S    synth's --statistics: trained (default: correlated inputs, as in trained models) or iid
  --text FILE       held-out text (default: /usr/share/common-licenses/GPL-3), 16 chunks of 128 tokens
EOF
}

work='' bin='' moequant=moequant families="qwen3_moe:bf16 deepseek_v3:fp8 mixtral:bf16" presets=Q4_K_M statistics=trained
text=/usr/share/common-licenses/GPL-3
while (($#)); do
  case $1 in
    --work) work=$2; shift 2 ;;
    --llama-bin) bin=$2; shift 2 ;;
    --moequant) moequant=$2; shift 2 ;;
    --families) families=$2; shift 2 ;;
    --presets) presets=$2; shift 2 ;;
    --statistics) statistics=$2; shift 2 ;;
    --text) text=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
[[ -n $work && -x $bin/llama-perplexity ]] || { usage >&2; exit 2; }
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
first_part() { ls "$1"/*-00001-of-*.gguf | head -1; }
# llama-perplexity at d32676d7 now and then loses its last log lines at exit (its asynchronous
# logger): run it up to five times until the log has the summary line.
perplexity() {  # log, arguments
  local log=$1 try; shift
  for try in 1 2 3 4 5; do
    "$bin/llama-perplexity" "$@" -f "$text" -c 128 --chunks 16 -t 2 > "$log" 2>&1 || true
    grep -q "${summary:-Final estimate}" "$log" && return 0
  done
  echo "llama-perplexity $* gave no summary ($log)" >&2
  return 1
}

status=0
echo "family | preset | file | mean KLD vs BF16 (llama-perplexity)"
for spec in $families; do
  family=${spec%%:*} dtype=${spec##*:} dir=$work/${spec%%:*}
  rm -rf "$dir" && mkdir -p "$dir"
  "$moequant" synth --family "$family" --dtype "$dtype" --statistics "$statistics" --out "$dir/src" > "$dir/synth.log" 2>&1
  "$moequant" record --model_id "$dir/src" --dataset embedded --output "$dir/inputs.safetensors" -q
  convert() { "$moequant" convert -i "$dir/src" -o "$dir/$1" --format gguf -q --tensor-type '^(?!.*_exps\.).*=bf16' "${@:2}"; }
  convert BF16 --quant-method BF16
  summary="Final estimate" perplexity "$dir/base.log" -m "$(first_part "$dir/BF16")" --kl-divergence-base "$dir/base.kld"
  for preset in $presets; do
    convert "$preset-plain" --quant-method "$preset"
    convert "$preset-imatrix" --quant-method "$preset" --calibrate --calibration-activations "$dir/inputs.safetensors"
    convert "$preset-gptq" --quant-method "$preset" --calibrate --gptq --calibration-activations "$dir/inputs.safetensors"
    declare -A mean=()
    for file in plain imatrix gptq; do
      summary="Mean *KLD" perplexity "$dir/$preset-$file.log" -m "$(first_part "$dir/$preset-$file")" \
        --kl-divergence-base "$dir/base.kld" --kl-divergence
      mean[$file]=$(sed -n 's/^Mean *KLD: *\([0-9.e+-]*\).*/\1/p' "$dir/$preset-$file.log" | head -1)
      echo "$family | $preset | $file | ${mean[$file]}"
    done
    if ! awk -v g="${mean[gptq]}" -v i="${mean[imatrix]}" 'BEGIN { exit !(g < i) }'; then
      echo "$family $preset: GPTQ's KLD ${mean[gptq]} is not below the importance matrix's ${mean[imatrix]}" >&2
      status=1
    fi
    unset mean
  done
done
exit $status
