#!/usr/bin/env bash
# Runs every test stage of conventions.md §3 and prints one summary line per stage:
#   1. release   : Release build (GCC) + every CTest suite: unit, integration, golden, emulation, sdk, docs
#   2. sanitize  : clang ASan+UBSan build of the SDK, engine, plugins and tests + the unit and integration suites
#   3. fuzz      : each libFuzzer target for MOEQUANT_FUZZ_SECONDS (default 30) seconds
# Set MOEQUANT_TEST_STAGES="release sanitize fuzz" to run a subset.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${MOEQUANT_SHARED_DIR:-$root/../shared}
stages=${MOEQUANT_TEST_STAGES:-release sanitize fuzz}
fuzz_seconds=${MOEQUANT_FUZZ_SECONDS:-30}
jobs=$(nproc)
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CTEST_OUTPUT_ON_FAILURE=1

summary=()
failed=0
stage() {  # stage NAME COMMAND...: runs, times and records one stage
  local name=$1; shift
  local start=$SECONDS
  echo "==> stage $name"
  if "$@"; then
    summary+=("stage $name: PASS ($((SECONDS - start)) s)")
  else
    summary+=("stage $name: FAIL ($((SECONDS - start)) s)")
    failed=1
  fi
}

release() {
  cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER=g++ -DCMAKE_CXX_COMPILER_LAUNCHER=ccache "-DMOEQUANT_SHARED_DIR=$shared" &&
  cmake --build "$root/build" --parallel "$jobs" &&
  ctest --test-dir "$root/build" --parallel "$jobs" --timeout 900
}

sanitize() {
  cmake -S "$root" -B "$root/build-asan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DMOEQUANT_SANITIZE=ON -DMOEQUANT_BUILD_FUZZERS=ON -DMOEQUANT_BUILD_BENCH=OFF \
    "-DMOEQUANT_SHARED_DIR=$shared" &&
  cmake --build "$root/build-asan" --parallel "$jobs" &&
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$root/build-asan" --parallel "$jobs" -L 'unit|integration' --timeout 900
}

fuzz() {
  local dir="$root/build-asan/tests/fuzz" ok=0 target corpus scratch
  for target in "$dir"/fuzz_*; do
    [[ -x "$target" && -f "$target" && "$target" != *.dict ]] || continue
    corpus="$root/build-asan/fuzz-corpus/$(basename "$target")"
    mkdir -p "$corpus"
    # The targets' scratch files in a folder of their own, removed after: libFuzzer ends a
    # timed run without the targets' exit handlers, which left them in /tmp.
    scratch=$(mktemp -d) || return 1
    echo "--> $(basename "$target") for ${fuzz_seconds}s"
    TMPDIR="$scratch" "$target" -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -dict="$target.dict" "$corpus" "$dir/seeds/$(basename "$target")" > "$corpus.log" 2>&1 || ok=1
    rm -rf "$scratch"
    grep -E "^(Done|stat::new_units_added|==[0-9]+==ERROR|SUMMARY)" "$corpus.log"
  done
  return $ok
}

"$root/scripts/install-deps.sh" --clang --browser || exit 1
for s in $stages; do
  case $s in
    release) stage release release ;;
    sanitize) stage sanitize sanitize ;;
    fuzz) stage fuzz fuzz ;;
    *) echo "unknown stage $s" >&2; exit 2 ;;
  esac
done
echo
printf '%s\n' "${summary[@]}"
exit $failed
