#!/usr/bin/env bash
# Prints the README's example eval table, every row from one run: a synthesized model, each
# kind of output the tool writes, and `moequant eval` of each on held-out text. Calibration
# (GPTQ, calibrated AMX, GGUF's importance matrix and GPTQ codes, the GPU-expert placement) runs on 64 paragraphs of the licence texts
# every Debian system has (/usr/share/common-licenses); eval on four rows of the embedded text.
# Needs python3 (JSON) besides moequant.
#   scripts/eval-table.sh [moequant] [family] [iid|trained]   (default: build/bin/moequant, qwen3_moe,
#                                                             trained: synth --statistics)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
moequant=${1:-$root/build/bin/moequant}
family=${2:-qwen3_moe}
statistics=${3:-trained}
work=$(mktemp -d "${TMPDIR:-/tmp}/moequant-eval-table.XXXXXX")
trap 'rm -rf "$work"' EXIT
python3 - "$work/licences.jsonl" <<'EOF'
import json, os, sys
folder = "/usr/share/common-licenses"
with open(sys.argv[1], "w") as out:
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        for paragraph in open(path, errors="replace").read().split("\n\n"):
            text = " ".join(paragraph.split())
            if len(text) > 200:
                out.write(json.dumps({"text": text}) + "\n")
EOF
calibration=(--dataset "$work/licences.jsonl" --num_calibration_samples 64)
held_out=(--dataset embedded --num_calibration_samples 4 --max_sequence_length 64)

m=$work/model
"$moequant" synth --family "$family" --statistics "$statistics" --out "$m" > /dev/null
"$moequant" convert -q -i "$m" -o "$work/int4" --quant-method int4 > /dev/null
"$moequant" convert -q -i "$m" -o "$work/int8" --quant-method int8 > /dev/null
"$moequant" convert -q -i "$m" -o "$work/int4-cal" --quant-method int4 --calibrate "${calibration[@]}" > /dev/null 2>&1
"$moequant" gptq -q --model_id "$m" --output_dir "$work/rtn" --quant_type W4A16 --quant_method RTN > /dev/null
"$moequant" gptq -q --model_id "$m" --output_dir "$work/gptq" --quant_type W4A16 "${calibration[@]}" > /dev/null 2>&1
"$moequant" gptq -q --model_id "$m" --output_dir "$work/gptq-kt" --for kt-rawint4 "${calibration[@]}" > /dev/null 2>&1
"$moequant" record -q --model_id "$m" "${calibration[@]}" --output "$work/acts.safetensors" > /dev/null
gguf=(--format gguf --quant-method Q4_K_M)
"$moequant" convert -q -i "$m" -o "$work/q4km" "${gguf[@]}" > /dev/null
"$moequant" convert -q -i "$m" -o "$work/q4km-imatrix" "${gguf[@]}" --calibrate "${calibration[@]}" > /dev/null 2>&1
"$moequant" convert -q -i "$m" -o "$work/q4km-gptq" "${gguf[@]}" --calibrate --gptq "${calibration[@]}" > /dev/null 2>&1
"$moequant" plan --model_id "$m" --activations "$work/acts.safetensors" --num-gpu-experts 4 \
  --output "$work/placement.json" > /dev/null

# One table row from eval's --json: KL mean, KL p99, top-1 agreement, the per-layer errors.
row() {
  local label=$1; shift
  "$moequant" eval -q --json --model_id "$m" "${held_out[@]}" "$@" 2> /dev/null |
    python3 -c '
import json, sys
r = json.load(sys.stdin)
layers = ", ".join("%.3f" % l["relative_output_error"] for l in r["layers"])
print("| %s | %.1e | %.1e | %.3f | %s |" % (sys.argv[1], r["kl_mean"], r["kl_p99"], r["top1_agreement"], layers))
' "$label"
}
tokens=$("$moequant" eval -q --json --model_id "$m" "${held_out[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
echo "synth --family $family --statistics $statistics, $tokens held-out tokens"
echo
echo "| experts | KL mean | KL p99 | top-1 | layer error |"
echo "| --- | --- | --- | --- | --- |"
row 'AMX INT4 (`convert`)' --cpu-weights "$work/int4"
row 'AMX INT4 calibrated (`convert --calibrate`)' --cpu-weights "$work/int4-cal"
row 'AMX INT8' --cpu-weights "$work/int8"
row 'GGUF Q4_K_M (`convert --format gguf`)' --cpu-weights "$work/q4km"
row 'GGUF Q4_K_M, importance matrix measured (`--calibrate`)' --cpu-weights "$work/q4km-imatrix"
row 'GGUF Q4_K_M, GPTQ codes (`--calibrate --gptq`)' --cpu-weights "$work/q4km-gptq"
row 'W4A16 RTN (`gptq --quant_method RTN`)' --gpu-weights "$work/rtn"
row 'W4A16 GPTQ' --gpu-weights "$work/gptq"
row 'W4A16 GPTQ group 32, codes -7..7 (`gptq --for kt-rawint4`)' --gpu-weights "$work/gptq-kt"
row 'hybrid: AMX INT4 + 4 GPTQ experts' --cpu-weights "$work/int4" --gpu-weights "$work/gptq" \
  --placement "$work/placement.json"
