#!/bin/bash
# llama.cpp's forward on moequant's GGUF against the Hugging Face model, family by family:
# synth -> convert (BF16 GGUF) -> llama-quantize F32 (an exact widening) -> llama-perplexity
# --kl-divergence-base -> check_forward.py. See README.md.
#
#   check_forward.sh --work DIR [--families "qwen3_next minimax_m3 ..."] [--moequant BIN]
#                    [--llama-bin DIR] [--text FILE] [--chunks N] [--ctx N] [--sharpen "1 4"]
#                    [--attention "LLAMA ARGS"] [--max-kl X]
# By default llama.cpp attends in float32 throughout (-fa off, F32 K/V cache): its arithmetic is
# then the reference's up to float rounding, so the KL bound is tight (1e-8). Its default F16 K/V
# cache or flash attention (whose CPU kernel rounds to F16 inside) round the attention enough to
# flip a near-tied expert choice now and then: --attention "-fa on" --max-kl 1e-3 (README).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=
FAMILIES="qwen3_next qwen3_5_moe minimax_m3 minimax_m2 glm4_moe deepseek_v3 qwen3_moe"
MOEQUANT=${MOEQUANT:-/tmp/snap/bin/moequant}
LLAMA_BIN=${LLAMA_BIN:-/tmp/lc-new/llama.cpp-d32676d77426/build/bin}
TEXT=/usr/share/common-licenses/GPL-3
CHUNKS=4
CTX=128
SHARPEN="1 4"  # 1: the checkpoint as synthesized; S > 1: attention scores x S^2 (sharpen.py)
ATTENTION="-fa off -ctk f32 -ctv f32"
MAX_KL=1e-8
PY=${PYTHON:-/usr/bin/python3}
while [ $# -gt 0 ]; do
  case "$1" in
    --work) WORK=$2; shift 2;;
    --families) FAMILIES=$2; shift 2;;
    --moequant) MOEQUANT=$2; shift 2;;
    --llama-bin) LLAMA_BIN=$2; shift 2;;
    --text) TEXT=$2; shift 2;;
    --chunks) CHUNKS=$2; shift 2;;
    --ctx) CTX=$2; shift 2;;
    --sharpen) SHARPEN=$2; shift 2;;
    --attention) ATTENTION=$2; shift 2;;
    --max-kl) MAX_KL=$2; shift 2;;
    *) echo "unknown argument $1" >&2; exit 2;;
  esac
done
[ -n "$WORK" ] || { echo "usage: $0 --work DIR [--families LIST]" >&2; exit 2; }
mkdir -p "$WORK"
SUMMARY="$WORK/summary.txt"
: > "$SUMMARY"
failed=0

# the bytes llama-perplexity must have written: header, tokens, per chunk the second half's log-probs
expected_size() {  # n_vocab
  local nv=$(( 2 * (($1 + 1) / 2) + 4 ))
  echo $(( 20 + 4 * CTX * CHUNKS + CHUNKS * (CTX - 1 - CTX / 2) * nv * 2 ))
}

for fam in $FAMILIES; do
 for s in $SHARPEN; do
  d="$WORK/$fam-x$s"
  rm -rf "$d"; mkdir -p "$d"
  echo "== $fam, attention sharpened x$s"
  dtype=bf16
  if ! "$MOEQUANT" synth --family "$fam" --dtype $dtype --out "$d/src" > "$d/synth.log" 2>&1; then
    echo "$fam synth failed: $(tail -1 "$d/synth.log")" | tee -a "$SUMMARY"; failed=1; continue
  fi
  if [ "$s" != 1 ] && ! "$PY" "$HERE/sharpen.py" "$d/src" "$fam" "$s"; then
    echo "$fam sharpen failed" | tee -a "$SUMMARY"; failed=1; continue
  fi
  # moequant's GGUF presets stop at F16/BF16; the BF16 file holds the checkpoint's values exactly and
  # llama-quantize F32 widens them exactly, so llama.cpp computes in float32 on moequant's tensors.
  if ! "$MOEQUANT" convert -i "$d/src" -o "$d/bf16" --format gguf --quant-method BF16 --single-file --quiet \
       > "$d/convert.log" 2>&1; then
    echo "$fam convert failed: $(tail -1 "$d/convert.log")" | tee -a "$SUMMARY"; failed=1; continue
  fi
  if ! "$LLAMA_BIN/llama-quantize" "$d/bf16/model.gguf" "$d/model-f32.gguf" F32 2 > "$d/quantize.log" 2>&1; then
    echo "$fam llama-quantize F32 failed: $(tail -1 "$d/quantize.log")" | tee -a "$SUMMARY"; failed=1; continue
  fi
  n_vocab=$("$PY" -c "import json,sys; c=json.load(open(sys.argv[1])); print(c.get('text_config', c)['vocab_size'])" "$d/src/config.json")
  want=$(expected_size "$n_vocab")
  ok=0
  for try in 1 2 3; do  # on a loaded machine llama-perplexity can exit before its output is complete
    rm -f "$d/logits.bin"
    "$LLAMA_BIN/llama-perplexity" -m "$d/model-f32.gguf" -f "$TEXT" -c "$CTX" -b "$CTX" --chunks "$CHUNKS" \
      --kl-divergence-base "$d/logits.bin" -t 2 $ATTENTION > "$d/perplexity.log" 2>&1
    size=$(stat -c %s "$d/logits.bin" 2>/dev/null || echo 0)
    if [ "$size" = "$want" ]; then ok=1; break; fi
    echo "  llama-perplexity try $try: logits file $size bytes, expected $want; retrying"
  done
  if [ $ok = 0 ]; then
    echo "$fam llama-perplexity: no complete logits file (see $d/perplexity.log)" | tee -a "$SUMMARY"; failed=1; continue
  fi
  grep "Final estimate" "$d/perplexity.log" | sed 's/^[^F]*/  llama-perplexity: /'
  "$PY" "$HERE/check_forward.py" "$d/src" "$fam" "$d/logits.bin" --gguf "$d/model-f32.gguf" --max-kl "$MAX_KL" | tee "$d/check.log"
  [ "${PIPESTATUS[0]}" = 0 ] || failed=1
  grep '^RESULT' "$d/check.log" | sed "s/^RESULT $fam /RESULT $fam x$s /" >> "$SUMMARY"
 done
done

echo
printf '%-12s %-7s %-14s %-12s %-12s %-8s %-14s\n' family attn chunks*tokens 'max|dlogp|' 'mean KL' top-1 'neg. ctrl KL'
while read -r tag fam sh nch nctx md kl top neg; do
  if [ "$tag" = RESULT ]; then
    printf '%-12s %-7s %-14s %-12s %-12s %-8s %-14s\n' "$fam" "$sh" "${nch}x${nctx}" "$md" "$kl" "$(awk "BEGIN{printf \"%.2f%%\", 100*$top}")" "$neg"
  else
    echo "$tag $fam $sh $nch $nctx $md $kl $top $neg"
  fi
done < "$SUMMARY"
exit $failed
