#!/usr/bin/env bash
# Prints the README's eval table, every row from one run: a model, each kind of output the tool
# writes of it, and `moequant eval` of each on held-out text. Calibration (GPTQ, calibrated AMX,
# GGUF's importance matrix and GPTQ codes, the GPU-expert placement) runs on 64 paragraphs of the
# licence texts every Debian system has (/usr/share/common-licenses).
#
#   scripts/eval-table.sh [--moequant BIN] [--model DIR | --synth FAMILY [--statistics iid|trained]]
#                         [--gpu-experts N]
#
# The default model is the small Mixtral trained on man pages (tests/data/trained/mixtral-tiny),
# judged on its own held-out rows (heldout.jsonl, text it never saw). A model without a
# heldout.jsonl, and a synthesized one (--synth), is judged on four rows of the embedded text.
# Needs python3 (JSON) besides moequant.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
moequant=$root/build/bin/moequant
model=$root/tests/data/trained/mixtral-tiny
family=
statistics=trained
gpu_experts=
usage() { sed -n '7,8p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --moequant) moequant=$2; shift 2 ;;
    --model) model=$2; family=; shift 2 ;;
    --synth) family=$2; shift 2 ;;
    --statistics) statistics=$2; shift 2 ;;
    --gpu-experts) gpu_experts=$2; shift 2 ;;
    *) usage ;;
  esac
done
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

if [ -n "$family" ]; then
  m=$work/model
  "$moequant" synth --family "$family" --statistics "$statistics" --out "$m" > /dev/null
  described="synth --family $family --statistics $statistics"
else
  m=$model
  described=$(basename "$model")
fi
if [ -f "$m/heldout.jsonl" ]; then
  rows=$(wc -l < "$m/heldout.jsonl")
  held_out=(--dataset "$m/heldout.jsonl" --num_calibration_samples "$rows" --max_sequence_length 256)
  described="$described, its $rows held-out rows"
else
  held_out=(--dataset embedded --num_calibration_samples 4 --max_sequence_length 64)
  described="$described, 4 rows of the embedded text"
fi
# A quarter of the routed experts on the GPU in the hybrid row, unless told.
if [ -z "$gpu_experts" ]; then
  gpu_experts=$(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
experts = c.get("num_local_experts") or c.get("n_routed_experts") or c.get("num_experts") or 8
layers = c["num_hidden_layers"] - c.get("first_k_dense_replace", 0)
print(max(1, layers * experts // 4))' "$m/config.json")
fi

q() { "$moequant" "$@" -q > /dev/null 2>&1 || { echo "failed: moequant $*" >&2; exit 1; }; }
q convert -i "$m" -o "$work/int4" --quant-method int4
q convert -i "$m" -o "$work/int8" --quant-method int8
q convert -i "$m" -o "$work/int4-cal" --quant-method int4 --calibrate "${calibration[@]}"
q gptq --model_id "$m" --output_dir "$work/rtn" --quant_type W4A16 --quant_method RTN
q gptq --model_id "$m" --output_dir "$work/gptq" --quant_type W4A16 "${calibration[@]}"
q gptq --model_id "$m" --output_dir "$work/gptq-kt" --for kt-rawint4 "${calibration[@]}"
q record --model_id "$m" "${calibration[@]}" --output "$work/acts.safetensors"
gguf=(--format gguf --quant-method Q4_K_M)
q convert -i "$m" -o "$work/q4km" "${gguf[@]}"
q convert -i "$m" -o "$work/q4km-imatrix" "${gguf[@]}" --calibrate "${calibration[@]}"
q convert -i "$m" -o "$work/q4km-gptq" "${gguf[@]}" --calibrate --gptq "${calibration[@]}"
q plan --model_id "$m" --activations "$work/acts.safetensors" --num-gpu-experts "$gpu_experts" \
  --output "$work/placement.json"

# One table row from eval's --json: perplexity, KL mean, KL p99, top-1 agreement, layer errors.
row() {
  local label=$1; shift
  "$moequant" eval -q --json --model_id "$m" "${held_out[@]}" "$@" 2> /dev/null |
    python3 -c '
import json, sys
r = json.load(sys.stdin)
layers = ", ".join("%.3f" % l["relative_output_error"] for l in r["layers"])
print("| %s | %.2f | %.1e | %.1e | %.3f | %s |" % (sys.argv[1], r["perplexity_quantized"], r["kl_mean"],
      r["kl_p99"], r["top1_agreement"], layers))
' "$label"
}
read -r tokens perplexity < <("$moequant" eval -q --json --model_id "$m" "${held_out[@]}" |
  python3 -c 'import json,sys; r = json.load(sys.stdin); print(r["tokens"], "%.2f" % r["perplexity_source"])')
echo "$described: $tokens tokens, source perplexity $perplexity"
echo
echo "| experts | perplexity | KL mean | KL p99 | top-1 | layer error |"
echo "| --- | --- | --- | --- | --- | --- |"
row 'AMX INT4 (`convert`)' --cpu-weights "$work/int4"
row 'AMX INT4 calibrated (`convert --calibrate`)' --cpu-weights "$work/int4-cal"
row 'AMX INT8' --cpu-weights "$work/int8"
row 'GGUF Q4_K_M (`convert --format gguf`)' --cpu-weights "$work/q4km"
row 'GGUF Q4_K_M, importance matrix measured (`--calibrate`)' --cpu-weights "$work/q4km-imatrix"
row 'GGUF Q4_K_M, GPTQ codes (`--calibrate --gptq`)' --cpu-weights "$work/q4km-gptq"
row 'W4A16 RTN (`gptq --quant_method RTN`)' --gpu-weights "$work/rtn"
row 'W4A16 GPTQ' --gpu-weights "$work/gptq"
row 'W4A16 GPTQ group 32, codes -7..7 (`gptq --for kt-rawint4`)' --gpu-weights "$work/gptq-kt"
row "hybrid: AMX INT4 calibrated + $gpu_experts GPTQ experts" --cpu-weights "$work/int4-cal" \
  --gpu-weights "$work/gptq" --placement "$work/placement.json"
