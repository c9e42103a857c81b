#!/usr/bin/env bash
# Runs across MPI ranks (docs/cluster.md): the speed-up of `mpirun -np 2 moequant gptq --dataset
# ... --threads 1` and of `convert` over one process with one thread, on the small preset,
# measured in the same run (the faster of REPEATS alternating runs each; wall time with mpirun's
# start-up, and the conversion's own time from the summary line), the bytes the ranks exchange
# per layer, and the share of the run rank 0 spends proving by digests that every rank read its
# bytes (from the summary line). Then the cost of eval's check of an output's recorded digests:
# eval of the same output with its run manifest and of a copy without it (one process).
# The outputs must be byte-identical; the script fails otherwise.
#
# Usage: bench/cluster_bench.sh [BUILD_DIR] [REPEATS] [FAMILY...]   (defaults: build, 3, deepseek_v3 qwen3_moe)
set -euo pipefail
build="$(cd "${1:-build}" && pwd)"
repeats="${2:-3}"
shift $(( $# > 2 ? 2 : $# )) || true
families=("$@")
((${#families[@]})) || families=(deepseek_v3 qwen3_moe)
moequant="$build/bin/moequant"
mpi=(mpirun --bind-to core --mca btl self,vader --mca btl_vader_single_copy_mechanism none)
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

seconds() {  # seconds COMMAND...: wall seconds of one run (its output to $work/last.out)
  local start end
  start=$(date +%s.%N)
  "$@" > "$work/last.out" 2> "$work/last.err" || { cat "$work/last.err" >&2; return 1; }
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}
min() { printf '%s\n' "$@" | sort -g | head -1; }
# The conversion's own seconds from the summary line (what remains without process start-up).
run_seconds() { grep -o 'written, [0-9.]* s' "$work/last.out" | tail -1 | grep -o '[0-9.][0-9.]*'; }
hashes() { (cd "$1" && find . -type f ! -name moequant-run.json -print0 | sort -z | xargs -0 sha256sum); }

echo "the small preset: 2 ranks x 1 thread against 1 process x 1 thread"
echo "(the faster of $repeats runs each, alternating; $(nproc) cores)"
for family in "${families[@]}"; do
  model="$work/$family"
  [[ -d "$model" ]] || "$moequant" synth --family "$family" --preset small --out "$model" > /dev/null
  for command in gptq convert; do
  if [[ $command == gptq ]]; then
    args=(gptq --model_id "$model" --quant_type W4A16 --dataset embedded --threads 1 --quiet)
  else
    args=(convert -i "$model" --quant-method int4 --threads 1 --quiet)
  fi
  one=() two=() one_run=() two_run=()
  for ((i = 0; i < repeats; i++)); do
    one+=("$(seconds "$moequant" "${args[@]}" --output "$work/one-$i")")
    one_run+=("$(run_seconds)")
    two+=("$(seconds "${mpi[@]}" -np 2 "$moequant" "${args[@]}" --output "$work/two-$i")")
    two_run+=("$(run_seconds)")
    traffic=$(grep -o 'rank 0 sent .*a layer' "$work/last.out" || true)
    digests=$(grep -o 'digested .* of the run' "$work/last.out" || true)
    diff <(hashes "$work/one-$i") <(hashes "$work/two-$i") > /dev/null ||
      { echo "$family: 2 ranks wrote other bytes than one process" >&2; exit 1; }
    rm -rf "$work/one-$i" "$work/two-$i"
  done
  t1=$(min "${one[@]}") t2=$(min "${two[@]}") r1=$(min "${one_run[@]}") r2=$(min "${two_run[@]}")
  printf '%-12s %-7s 1 process %6.2f s   2 ranks %6.2f s   speed-up %.2fx (without start-up %.2fx)   %s; %s\n' "$family" \
    "$command" "$t1" "$t2" "$(echo "$t1 / $t2" | bc -l)" "$(echo "$r1 / $r2" | bc -l)" "$traffic" "$digests"
  done
done

echo
echo "eval's check of the output's recorded digests: eval with the run manifest / eval of a copy without it (1 process)"
for family in "${families[@]}"; do
  model="$work/$family"
  "$moequant" convert -i "$model" -o "$work/int4" --quant-method int4 --quiet
  cp -r "$work/int4" "$work/int4-bare" && rm "$work/int4-bare/moequant-run.json"
  checked=() bare=()
  for ((i = 0; i < repeats; i++)); do
    checked+=("$(seconds "$moequant" eval --model_id "$model" --dataset embedded --num_calibration_samples 4 --cpu-weights "$work/int4" -q)")
    bare+=("$(seconds "$moequant" eval --model_id "$model" --dataset embedded --num_calibration_samples 4 --cpu-weights "$work/int4-bare" -q)")
  done
  tc=$(min "${checked[@]}") tb=$(min "${bare[@]}")
  printf '%-12s eval %6.2f s, without the check %6.2f s: %.3fx, output %s\n' "$family" "$tc" "$tb" "$(echo "$tc / $tb" | bc -l)" \
    "$(du -sh "$work/int4" | cut -f1)"
  rm -rf "$work/int4" "$work/int4-bare"
done
