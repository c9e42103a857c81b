#!/usr/bin/env bash
# llama.cpp as the real client of `moequant convert --format gguf` (issue 38, item 4): builds
# llama.cpp (CPU only) at one commit, and for each synthesized family converts to a BF16 GGUF and
# to each preset, then
#   - runs llama-quantize on the BF16 part 1 (it reads the split) and compares its file with
#     moequant's preset output tensor by tensor (compare_tensors.py: type, dims, bytes);
#   - loads moequant's parts in llama-cli and generates a few tokens;
#   - runs llama-perplexity on a short text with moequant's file and with llama-quantize's;
#   - again with an importance matrix: llama-imatrix on the BF16 GGUF over moequant's embedded
#     text, then llama-quantize --imatrix and moequant convert --imatrix, compared the same way;
#   - and with moequant's own: `moequant record --imatrix` (legacy .dat) on the same text, then
#     llama-quantize --imatrix and moequant convert --imatrix with that file;
#   - the first preset packed: --single-file, and --split-max-size / --split-max-tensors parts
#     against llama-gguf-split's split of that single file (bytes), loaded, same perplexity.
# Prints a table and the llama.cpp commit; exits 1 on an unexpected difference or failure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
snapshot=c392e5094deaf2d1a7c18683214f007fad3fe42b  # the mirror's HEAD: llama-quantize's older rules

usage() {
  cat <<EOF
usage: $(basename "$0") --work DIR [options]

  --work DIR          where sources, builds, models and logs go (reused by a rerun)
  --llama PATH        llama.cpp git checkout or bare repository (default:
                      /work/.mirror/unslothai+llama.cpp/repo, a fork whose d32676d77426 holds
                      upstream ggml-org/llama.cpp 82bb48500's sources, 2026-08; the older
                      snapshot c392e509 is /work/.mirror/ggerganov+llama.cpp/repo)
  --commit REV        commit to build (default: HEAD of --llama)
  --llama-tree DIR    use this already exported llama.cpp source tree and its DIR/build instead
                      of exporting one: its files are checked against --commit first
  --moequant BIN      moequant binary (default: moequant on PATH)
  --families "F[:DTYPE] ..."
                      synth families and source dtypes
                      (default: "deepseek_v3:fp8 deepseek_v3:bf16 deepseek_v32:fp8 glm_moe_dsa
                      kimi_k2 kimi_k26 qwen3_moe qwen3_vl_moe mixtral glm4_moe minimax_m2 minimax_m3
                      minimax_m3:mxfp8 qwen3_next qwen3_5_moe
                      gpt_oss:mxfp4 deepseek_v4:mxfp4": gpt-oss's and DeepSeek-V4's experts as
                      released)
  --presets "P ..."   quant presets (default: "Q4_K_M Q8_0 Q6_K IQ4_XS")
  --jobs N            build jobs (default 2)
  --python PY         python with numpy; gguf-py is taken from PYTHONPATH, else from the
                      llama.cpp tree (default: the first of python3, /usr/bin/python3 with numpy)

llama.cpp is built Release, CPU only, shared libraries, GGML_NATIVE=OFF, in <tree>/build; a
rerun with the same work dir only checks that build (seconds). A family whose architecture this
llama.cpp does not know is reported "not in this llama.cpp", one moequant refuses (exit 3) is
reported "moequant refuses"; neither fails the run. At the snapshot $snapshot (or an ancestor),
llama-quantize predates two rules moequant follows (docs/gguf-format.md): for DeepSeek moequant
is given --tensor-type attn_kv_b=<the preset's base type> (Q4_K_M: q4_K, IQ4_XS: iq4_xs), and
Q2_K/Q3_K_* tensors where moequant writes Q4_0 and llama-quantize IQ4_NL (rows not a multiple
of 256) are reported as expected. Every other difference is unexpected. A llama.cpp without the
absorbed-MLA tensors (attn_k_b / attn_v_b, 2025-04) gets DeepSeek with --legacy-mla.
EOF
}

work='' llama=/work/.mirror/unslothai+llama.cpp/repo commit=HEAD tree='' moequant=moequant jobs=2 python=''
families="deepseek_v3:fp8 deepseek_v3:bf16 deepseek_v32:fp8 glm_moe_dsa kimi_k2 kimi_k26 qwen3_moe qwen3_vl_moe mixtral glm4_moe minimax_m2 minimax_m3 minimax_m3:mxfp8 qwen3_next qwen3_5_moe gpt_oss:mxfp4 deepseek_v4:mxfp4"
presets="Q4_K_M Q8_0 Q6_K IQ4_XS"
while [ $# -gt 0 ]; do
  case $1 in -h|--help) usage; exit 0 ;; esac
  [ $# -ge 2 ] || { echo "$1 needs a value" >&2; exit 2; }
  case $1 in
    --work) work=$2 ;; --llama) llama=$2 ;; --commit) commit=$2 ;; --llama-tree) tree=$2 ;;
    --moequant) moequant=$2 ;; --families) families=$2 ;; --presets) presets=$2 ;;
    --jobs) jobs=$2 ;; --python) python=$2 ;;
    *) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
  esac
  shift 2
done
[ -n "$work" ] || { usage >&2; exit 2; }
mkdir -p "$work/logs" && work=$(cd "$work" && pwd)
moequant=$(command -v "$moequant") || { echo "no moequant binary: $moequant" >&2; exit 2; }
log() { echo "== $*" >&2; }

# ---- llama.cpp: the commit, its source tree, its build
sha=$(git -C "$llama" rev-parse --verify "$commit^{commit}")
described="$(git -C "$llama" log -1 --format='%h %cs "%s"' "$sha")"
if [ -n "$tree" ]; then
  tree=$(cd "$tree" && pwd)
  # Every tracked file of the built directories must be in the tree, byte for byte.
  git -C "$llama" ls-tree -r "$sha" -- CMakeLists.txt cmake common examples ggml include src tools |
    awk '$2 == "blob" { print $3, $4 }' | sort -k2 > "$work/logs/tracked.txt"
  (cd "$tree" && cut -d' ' -f2- "$work/logs/tracked.txt" | while read -r p; do
     if [ -f "$p" ]; then echo "$(git hash-object --no-filters "$p") $p"; else echo "missing $p"; fi
   done) | sort -k2 > "$work/logs/tree.txt"
  if ! cmp -s "$work/logs/tracked.txt" "$work/logs/tree.txt"; then
    echo "$tree is not llama.cpp $sha:" >&2
    diff "$work/logs/tracked.txt" "$work/logs/tree.txt" | head -5 >&2 || true
    exit 2
  fi
  log "llama.cpp tree $tree: its $(wc -l < "$work/logs/tracked.txt") source files are those of $sha"
else
  tree=$work/llama.cpp-${sha:0:12}
  if [ ! -f "$tree/CMakeLists.txt" ]; then
    # A mirror may lack its largest blobs (models/*.gguf test vocabularies): export without them.
    git -C "$llama" ls-tree -r "$sha" | awk -F'\t' '{ split($1, m, " "); if (m[2] == "blob") print m[3] "\t" $2 }' \
      > "$work/logs/blobs.txt"
    exclude=()
    while IFS=$'\t' read -r _ path; do exclude+=(":(exclude)$path"); done < <(
      cut -f1 "$work/logs/blobs.txt" | git -C "$llama" cat-file --batch-check='%(objectname) %(objecttype)' |
        paste - "$work/logs/blobs.txt" | awk -F'\t' '$1 ~ / missing$/ { print $2 "\t" $3 }')
    log "exporting llama.cpp $sha to $tree (${#exclude[@]} files absent from the repository left out)"
    rm -rf "$tree.tmp" && mkdir -p "$tree.tmp"
    git -C "$llama" archive "$sha" -- . "${exclude[@]}" | tar -x -C "$tree.tmp" ||
      { echo "cannot export $sha from $llama" >&2; exit 1; }
    mv "$tree.tmp" "$tree"
  fi
fi
build=$tree/build
if [ ! -f "$build/CMakeCache.txt" ]; then
  log "configuring llama.cpp in $build"
  cmake -S "$tree" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=OFF \
    -DLLAMA_CURL=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DLLAMA_BUILD_TESTS=OFF > "$work/logs/cmake.log" 2>&1 ||
    { tail -20 "$work/logs/cmake.log" >&2; exit 1; }
fi
# Newer llama.cpp moved the non-interactive generator to llama-completion.
generator="llama-cli"
if cmake --build "$build" --target help 2>/dev/null | grep -E '(^|[ .])llama-completion(:|$)' > /dev/null; then
  generator="llama-completion"
fi
log "building $generator llama-quantize llama-perplexity llama-imatrix llama-gguf-split (-j$jobs; log: $work/logs/build.log)"
cmake --build "$build" -j"$jobs" --target "$generator" llama-quantize llama-perplexity llama-imatrix llama-gguf-split \
  > "$work/logs/build.log" 2>&1 ||
  { tail -20 "$work/logs/build.log" >&2; exit 1; }
bin=$build/bin
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
old_rules=no
git -C "$llama" merge-base --is-ancestor "$sha" "$snapshot" 2>/dev/null && old_rules=yes

# ---- python with numpy and gguf-py for compare_tensors.py
[ -d "$tree/gguf-py" ] && export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$tree/gguf-py
if [ -z "$python" ]; then
  for p in python3 /usr/bin/python3; do
    if "$p" -c 'import numpy, gguf' 2>/dev/null; then python=$p; break; fi
  done
fi
if [ -z "$python" ] || ! "$python" -c 'import numpy, gguf' 2>/dev/null; then
  echo "no python with numpy and gguf-py (set --python, PYTHONPATH)" >&2; exit 2
fi

# ---- a short text for llama-perplexity (-c 128 needs 2 x 128 tokens; the tiny models' byte-level
# vocabularies of 512 tokens make about 1 token of 3 characters)
text=$work/text.txt
cat > "$text" <<'EOF'
The river came down from the hills in the spring and filled the low fields with brown water. For a
week the farmers waited on the ridge, counting the fence posts that still stood above the flood,
and the children made boats of bark and sent them across to the other side. When the water went
back it left a smooth layer of silt over everything, and by early summer the wheat grew thicker
than anyone could remember. The old miller said it happened once in twenty years, and that the
good harvest was the river paying back what it had taken. Nobody argued with him; he had kept the
records of every flood since his father built the mill, in a book with a green cover that lay on
the table by the door. In the autumn the village sold more grain than it had in a decade, mended
the bridge with new oak, and raised the road along the bank by the height of a man's hand. The
next spring the river rose again, but only to the edge of the first field, and then it fell.
People walked down to look at it in the evening, as one might visit an animal that had been sick
and was well again, and they talked about the weather, the price of seed, and the new teacher who
had come from the city with a box of books and a telescope that he set up on clear nights behind
the school, so that anyone who wanted could look at the moons of the largest planet.
EOF

# ---- the importance matrix's text: moequant's embedded calibration text (about 7 KB, the text the
# synth tokenizers are trained on; at -c 128 about 15 chunks), not the perplexity text above
imatrix_text=$here/../../../../core/sdk/src/model/embedded_text.txt
[ -f "$imatrix_text" ] || { echo "no $imatrix_text" >&2; exit 2; }

# ---- per family
results=$work/results.tsv
: > "$results"
status=0
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$results"; }
# ppl MODEL LOG: llama-perplexity's final estimate, or FAIL. Up to five tries: on a loaded
# machine today's llama-perplexity (82bb48500) now and then ends before its asynchronous log has
# written the estimate (exit 0, or not; llama.cpp leaks its logger, #22142), for llama-quantize's
# files as for moequant's; a rerun gives it.
ppl() {
  local try
  for try in 1 2 3 4 5; do
    timeout 600 "$bin/llama-perplexity" -m "$1" -f "$text" -c 128 -t 2 > "$2" 2>&1 || continue
    if grep -a -q 'Final estimate: PPL = ' "$2"; then
      sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' "$2" | tail -1
      return
    fi
  done
  echo FAIL
}
generates() {  # generates MODEL LOG: ok when the tool loads the model and generates
  if timeout 300 "$bin/$generator" -m "$1" -p "The river" -n 8 -c 256 -no-cnv -t 2 --seed 1 --temp 0 \
       < /dev/null > "$2" 2>&1; then echo ok; else echo FAIL; fi
}
# expected DIFFLINES: whether every difference is one the older rules explain
expected() {
  [ "$old_rules" = yes ] || return 1
  case $preset in Q2_K|Q3_K_S|Q3_K_M|Q3_K_L) ;; *) return 1 ;; esac
  ! grep -v -E '^[^ ]+: Q4_0 (\([0-9, ]*\)) vs IQ4_NL \1$' "$1" | grep -q .
}

# quantize PRESET IMATRIX [LABEL]: moequant's and llama-quantize's PRESET (with the importance
# matrix IMATRIX unless it is empty, named LABEL in the table: "imatrix" by default) compared
# tensor by tensor, loaded, perplexity; one table row.
quantize() {
  local preset=$1 imatrix=$2 label=${3:-imatrix} name=$1 crc same note gen p_ours p_ref kinds base ours ref changed
  local override=() with=()
  if [ -n "$imatrix" ]; then name="$preset $label" with=(--imatrix "$imatrix"); fi
  local tag=${name// /-}
  log "$family ($dtype): $name"
  # The older llama-quantize gives attn_kv_b the preset's base type (Q4_K_M: q4_K), as any
  # tensor no rule names; the newer one treats it as attn_v.
  if [ "$old_rules" = yes ] && [ "$arch" = deepseek2 ]; then
    base=${preset%_[SML]} && base=${base,,} && base=${base/_k/_K}
    case $preset in BF16|F16|F32|MXFP4_MOE) ;; *) override=(--tensor-type "attn_kv_b=$base") ;; esac
  fi
  local crc_ours=0 crc_ref=0
  "$moequant" convert -i "$dir/src" -o "$dir/$tag" --format gguf --quant-method "$preset" "${legacy_mla[@]}" "${override[@]}" "${with[@]}" \
    > "$dir/$tag.log" 2>&1 || crc_ours=$?
  ours=$(part1 "$dir/$tag" 2> /dev/null || true) ref=$dir/llama-quantize-$tag.gguf
  timeout 600 "$bin/llama-quantize" "${requantize[@]}" "${with[@]}" "$bf16" "$ref" "$preset" 2 > "$dir/llama-quantize-$tag.log" 2>&1 ||
    crc_ref=$?
  # An importance matrix llama-quantize refuses (DeepSeek-V4's: llama-imatrix records the reshaped
  # 3-D attn_output_a) must be refused by moequant too, with the same entry.
  if [ $crc_ours = 3 ] && [ $crc_ref != 0 ] && grep -q ImatrixSizeMismatch "$dir/$tag.log" &&
     grep -q 'imatrix size .* is different from tensor size' "$dir/llama-quantize-$tag.log"; then
    row "$family" "$dtype" "$name" "-" "-" "-" "-" "both refuse the matrix: $(grep -o 'imatrix size .* is different from tensor size [0-9]* for [^ ]*' "$dir/llama-quantize-$tag.log" | head -1)"
    return
  fi
  [ $crc_ours = 0 ] || { cat "$dir/$tag.log" >&2; exit 1; }
  [ $crc_ref = 0 ] || { tail -5 "$dir/llama-quantize-$tag.log" >&2; exit 1; }
  crc=0; "$python" "$here/compare_tensors.py" "$dir/$tag" "$ref" > "$dir/compare-$tag.txt" 2>&1 || crc=$?
  [ $crc -le 1 ] || { cat "$dir/compare-$tag.txt" >&2; exit 1; }
  same=$(sed -n 's/^identical: \([0-9]*\) of \([0-9]*\) tensors$/\1 \/ \2/p' "$dir/compare-$tag.txt")
  grep -v -E '^(A|B) = |^identical: ' "$dir/compare-$tag.txt" > "$dir/differ-$tag.txt" || true
  note=${override[*]:+moequant ${override[*]} (older rule)}
  if [ -n "$imatrix" ]; then  # what the matrix changed: moequant's output against its plain one
    "$python" "$here/compare_tensors.py" "$dir/$tag" "$dir/$preset" > "$dir/compare-$tag-plain.txt" 2>&1 || true
    changed=$(sed -n 's/^identical: \([0-9]*\) of \([0-9]*\) tensors$/\2 - \1/p' "$dir/compare-$tag-plain.txt")
    note="the imatrix changes $((${changed:-0})) of ${same#*/ } tensors${note:+; $note}"
  fi
  if [ $crc = 1 ]; then
    if expected "$dir/differ-$tag.txt"; then note="expected: older Q2_K/Q3_K fallback (IQ4_NL, not Q4_0)${note:+; $note}"
    else
      kinds=$(awk '/: only in /{m++} /: bytes differ /{b++} / vs /{t++}
                   END {printf "%s%s%s", t ? t " in type or dims, " : "", b ? b " in bytes only, " : "", m ? m " missing, " : ""}' \
                "$dir/differ-$tag.txt")
      note="UNEXPECTED: ${kinds%, } (first: $(head -1 "$dir/differ-$tag.txt"))${note:+; $note}"; status=1
    fi
  fi
  gen=$(generates "$ours" "$dir/$tag.gen.log")
  [ "$gen" = ok ] || { note="UNEXPECTED: llama.cpp does not load it${note:+; $note}"; status=1; }
  p_ours=$(ppl "$ours" "$dir/$tag.ppl.log") p_ref=$(ppl "$ref" "$dir/llama-quantize-$tag.ppl.log")
  if [ "$p_ours" = FAIL ] || [ "$p_ref" = FAIL ]; then note="UNEXPECTED: perplexity failed${note:+; $note}"; status=1; fi
  row "$family" "$dtype" "$name" "$same" "$gen" "$p_ours" "$p_ref" "$note"
}
part1() { ls "$1"/model-00001-of-*.gguf; }

# packing PRESET: --single-file, --split-max-size 1M and --split-max-tensors 16 against
# llama-gguf-split's split of moequant's single file (every part the same bytes), loaded, and the
# same perplexity as the per-layer parts of PRESET; one table row.
packing() {
  local preset=$1 how flag value parts=0 same=0 gen p_single p_parts note='' tag=packed-$1
  local override=()
  if [ "$old_rules" = yes ] && [ "$arch" = deepseek2 ]; then  # as quantize() gives it
    local base=${preset%_[SML]} && base=${base,,} && base=${base/_k/_K}
    override=(--tensor-type "attn_kv_b=$base")
  fi
  log "$family ($dtype): $preset packed"
  "$moequant" convert -i "$dir/src" -o "$dir/$tag-single" --format gguf --quant-method "$preset" --single-file \
    "${legacy_mla[@]}" "${override[@]}" > "$dir/$tag-single.log" 2>&1 || { cat "$dir/$tag-single.log" >&2; exit 1; }
  for how in size:1M tensors:16; do
    flag=--split-max-${how%%:*} value=${how#*:}
    rm -rf "$dir/$tag-${how%%:*}" "$dir/$tag-${how%%:*}-llama" && mkdir -p "$dir/$tag-${how%%:*}-llama"
    "$moequant" convert -i "$dir/src" -o "$dir/$tag-${how%%:*}" --format gguf --quant-method "$preset" "$flag" "$value" \
      "${legacy_mla[@]}" "${override[@]}" > "$dir/$tag-${how%%:*}.log" 2>&1 || { cat "$dir/$tag-${how%%:*}.log" >&2; exit 1; }
    "$bin/llama-gguf-split" "$flag" "$value" "$dir/$tag-single/model.gguf" "$dir/$tag-${how%%:*}-llama/model" \
      > "$dir/$tag-${how%%:*}-llama.log" 2>&1 || { tail -5 "$dir/$tag-${how%%:*}-llama.log" >&2; exit 1; }
    for f in "$dir/$tag-${how%%:*}-llama"/*.gguf; do
      parts=$((parts + 1))
      if cmp -s "$f" "$dir/$tag-${how%%:*}/$(basename "$f")"; then same=$((same + 1)); fi
    done
    [ "$(ls "$dir/$tag-${how%%:*}"/*.gguf | wc -l)" = "$(ls "$dir/$tag-${how%%:*}-llama"/*.gguf | wc -l)" ] ||
      { note="UNEXPECTED: llama-gguf-split makes another number of parts ($flag $value)"; status=1; }
  done
  [ "$same" = "$parts" ] || { note="UNEXPECTED: parts differ from llama-gguf-split's${note:+; $note}"; status=1; }
  gen=$(generates "$dir/$tag-single/model.gguf" "$dir/$tag-single.gen.log")
  [ "$gen" = ok ] || { note="UNEXPECTED: llama.cpp does not load the single file${note:+; $note}"; status=1; }
  p_single=$(ppl "$dir/$tag-single/model.gguf" "$dir/$tag-single.ppl.log")
  p_parts=$(ppl "$(part1 "$dir/$tag-size")" "$dir/$tag-size.ppl.log")
  [ "$p_single" = "$p_parts" ] && [ "$p_single" = "$(ppl "$(part1 "$dir/$preset")" "$dir/$tag-layers.ppl.log")" ] ||
    { note="UNEXPECTED: perplexity differs between the layouts${note:+; $note}"; status=1; }
  row "$family" "$dtype" "$preset --single-file, --split-max-size 1M, --split-max-tensors 16" \
    "$same / $parts parts bytes" "$gen" "$p_single" "$p_parts" \
    "parts against llama-gguf-split's split of the single file; perplexity: single file, size parts (= per-layer parts)${note:+; $note}"
}

for spec in $families; do
  family=${spec%%:*} dtype=bf16
  [ "$family" != "$spec" ] && dtype=${spec#*:}
  dir=$work/models/$family-$dtype
  rm -rf "$dir" && mkdir -p "$dir"
  log "$family ($dtype): synth, BF16 GGUF"
  # GLM-5's tiny synth has an indexer head 4x its rotary dimension, which llama.cpp's glm-dsa does
  # not split right (moequant refuses it): the small one has the released models' 2x.
  synth_preset=(); [ "$family" = glm_moe_dsa ] && synth_preset=(--preset small)
  "$moequant" synth --family "$family" --dtype "$dtype" "${synth_preset[@]}" --out "$dir/src" > "$dir/synth.log" 2>&1 ||
    { cat "$dir/synth.log" >&2; exit 1; }
  # A llama.cpp without the absorbed-MLA tensors (before 2025-04) loads DeepSeek's attn_kv_b whole only.
  legacy_mla=()
  case $family in deepseek*|kimi*) grep -q 'ATTN_K_B' "$tree/src/llama-arch.cpp" 2>/dev/null || legacy_mla=(--legacy-mla) ;; esac
  rc=0; "$moequant" convert -i "$dir/src" -o "$dir/BF16" --format gguf --quant-method BF16 "${legacy_mla[@]}" > "$dir/BF16.log" 2>&1 || rc=$?
  if [ $rc = 3 ]; then
    row "$family" "$dtype" "all" "-" "-" "-" "-" "moequant refuses: $(sed -n 's/.*error: \(.*[^ ]\) *(.*/\1/p' "$dir/BF16.log" | head -1)"
    continue
  elif [ $rc != 0 ]; then
    cat "$dir/BF16.log" >&2; exit 1
  fi
  bf16=$(part1 "$dir/BF16")
  # gpt-oss's converter keeps MXFP4 experts MXFP4 in its BF16 GGUF, as moequant does: llama-quantize
  # then requantizes them only with --allow-requantize (MXFP4_MOE copies them).
  requantize=()
  if "$python" - "$dir/BF16" <<'PY'; then requantize=(--allow-requantize); fi
import glob, sys
from gguf import GGUFReader, GGMLQuantizationType as T
files = glob.glob(sys.argv[1] + "/*.gguf")
sys.exit(0 if any(t.tensor_type not in (T.F32, T.F16, T.BF16) for f in files for t in GGUFReader(f).tensors) else 1)
PY
  gen=$(generates "$bf16" "$dir/BF16.gen.log")
  arch=$(sed -n 's/.*general\.architecture  *str  *= \([^ ]*\).*/\1/p' "$dir/BF16.gen.log" | head -1)
  if grep -q "unknown model architecture" "$dir/BF16.gen.log"; then
    row "$family" "$dtype" "all" "-" "-" "-" "-" "not in this llama.cpp (unknown architecture $arch)"
    continue
  fi
  note=''; [ "$gen" = ok ] || { note="UNEXPECTED: BF16 does not load"; status=1; }
  row "$family" "$dtype" "BF16" "-" "$gen" "$(ppl "$bf16" "$dir/BF16.ppl.log")" "-" "$note"
  # The importance matrix of this family's BF16 GGUF (llama-imatrix writes the legacy .dat here).
  imatrix=$dir/imatrix.dat
  if ! timeout 600 "$bin/llama-imatrix" -m "$bf16" -f "$imatrix_text" -o "$imatrix" -c 128 --chunks 20 -t 2 \
       > "$dir/imatrix.log" 2>&1 || [ ! -s "$imatrix" ]; then
    tail -5 "$dir/imatrix.log" >&2; echo "llama-imatrix failed ($dir/imatrix.log)" >&2; exit 1
  fi
  # moequant's importance matrix of the routed experts on the same text (the legacy form, which
  # every llama-quantize reads).
  # A family moequant runs no forward for (gpt-oss: its router bias) has none: rows without it.
  recorded=$dir/record-imatrix.dat
  # DeepSeek-V3.2's dense calibration forward is its model only up to index_topk tokens (64 here).
  record_limit=(); case $family in deepseek_v32|glm_moe_dsa) record_limit=(--max_sequence_length 64) ;; esac
  rc=0; "$moequant" record --model_id "$dir/src" --dataset embedded --imatrix "$recorded" "${record_limit[@]}" --quiet > "$dir/record.log" 2>&1 || rc=$?
  if [ $rc != 0 ] && grep -q '(NoForward)' "$dir/record.log"; then
    row "$family" "$dtype" "record imatrix" "-" "-" "-" "-" "moequant records none: $(sed -n 's/.*error: \([^(]*[^ (]\) *(.*/\1/p' "$dir/record.log" | head -1)"
    recorded=''
  elif [ $rc != 0 ]; then
    cat "$dir/record.log" >&2; exit 1
  fi
  for preset in $presets; do
    quantize "$preset" ''
    quantize "$preset" "$imatrix"
    [ -z "$recorded" ] || quantize "$preset" "$recorded" "record imatrix"
  done
  packing "$(set -- $presets; echo "$1")"
done

# ---- the table
{
  echo "llama.cpp $described ($sha), built in $build; generator $generator; older quantize rules: $old_rules"
  echo "$("$moequant" --version 2>/dev/null | head -1) ($moequant)"
  echo
  echo "| family | source dtype | preset | tensors identical / total | llama-cli ok | perplexity (moequant) | perplexity (llama-quantize's) | note |"
  echo "|---|---|---|---|---|---|---|---|"
  while IFS=$'\t' read -r f d p s g a b n; do echo "| $f | $d | $p | $s | $g | $a | $b | $n |"; done < "$results"
} | tee "$work/table.md"
echo "logs and models: $work/models; table: $work/table.md"
exit $status
