#!/usr/bin/env bash
# Rewrites the --help blocks of docs/cli.md from the built host, so that the CTest
# docs.cli_reference passes again after a change to the command line:
#   scripts/update-cli-doc.sh [BUILD_DIR]      (default: build/, the folder scripts/test.sh uses)
# Builds the moequant target in BUILD_DIR first, then runs tests/docs/cli_reference_test.cmake in
# its rewrite mode. Review the diff it prints before committing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  echo "update-cli-doc: $build is not a configured build folder" >&2
  echo "  (configure one: cmake -S $root -B $build -G Ninja, or run scripts/test.sh)" >&2
  exit 2
fi
cmake --build "$build" --target moequant
cmake "-DMOEQUANT=$build/bin/moequant" "-DDOC=$root/docs/cli.md" -DUPDATE=ON \
  -P "$root/tests/docs/cli_reference_test.cmake"
git -C "$root" --no-pager diff --stat -- docs/cli.md || true
