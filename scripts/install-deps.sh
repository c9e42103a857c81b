#!/usr/bin/env bash
# Installs the Debian 12 packages moequant needs, and nothing else. Idempotent: when every
# package is present it changes nothing and needs no network.
#   scripts/install-deps.sh           build + test dependencies (GCC toolchain)
#   scripts/install-deps.sh --clang   also clang-14 and its sanitizer/fuzzer runtimes
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache
  libboost1.81-dev libboost-json1.81-dev libboost-program-options1.81-dev
  libboost-test1.81-dev libboost-filesystem1.81-dev
  libeigen3-dev libtbb-dev
  libblis-serial-dev  # Eigen's float products (EIGEN_USE_BLAS), CPU kernels chosen at run time
  libpcre2-dev libutf8proc-dev pkgconf  # the tokenizer: Unicode regexes, NFC normalization
  libsimde-dev  # tests only: runs the AVX-512 kernels on CPUs without AVX-512
)
if [[ "${1:-}" == "--clang" ]]; then
  packages+=(clang-14 libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "install-deps: missing packages (${missing[*]}) and no root rights or sudo to install them" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
