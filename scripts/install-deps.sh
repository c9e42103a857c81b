#!/usr/bin/env bash
# Installs the Debian 12 packages moequant needs, and nothing else. Idempotent: when every
# package is present it changes nothing and needs no network. One line per step; apt's own
# output goes to a log file (named on screen, printed in full when a step fails).
#   scripts/install-deps.sh           build + test dependencies (GCC toolchain)
#   scripts/install-deps.sh --clang   also clang-14 and its sanitizer/fuzzer runtimes
#   scripts/install-deps.sh --train   also what scripts/trained-model/ needs: PyTorch (its products
#                                     through OpenBLAS, given to it alone with LD_LIBRARY_PATH),
#                                     and the man pages' renderer (Node.js and npm come with the machine)
#   scripts/install-deps.sh --browser also Chromium, which renders the report page in the tests
# The options combine (scripts/test.sh: --clang --browser).
# MOEQUANT_LOG_DIR: where the log goes (default ~/.cache/moequant).
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache
  libboost1.81-dev libboost-json1.81-dev libboost-program-options1.81-dev
  libboost-test1.81-dev libboost-filesystem1.81-dev
  libeigen3-dev libtbb-dev
  libblis-serial-dev  # Eigen's float products (EIGEN_USE_BLAS), CPU kernels chosen at run time
  libdnnl-dev         # oneDNN: the calibration forward's BF16 products (AMX / AVX512-BF16 where present)
  ocl-icd-opencl-dev  # what Debian's dnnl-config.cmake requires (its GPU runtime is OpenCL)
  libopenmpi-dev openmpi-bin  # MOEQUANT_WITH_MPI: runs across ranks (mpirun -np N moequant ...)
  libpcre2-dev libutf8proc-dev pkgconf  # the tokenizer: Unicode regexes, NFC normalization
  libxxhash-dev  # XXH3 digests of what MPI ranks and reruns read (source_reads.hpp)
  libsimde-dev  # tests only: runs the AVX-512 kernels on CPUs without AVX-512
  zsh  # tests only: runs the zsh completion script
)
for option in "$@"; do
  case $option in
    --clang) packages+=(clang-14 libclang-rt-14-dev) ;;
    --train) packages+=(python3-torch python3-numpy libopenblas0-pthread man-db groff-base) ;;
    --browser) packages+=(chromium) ;;
    *) echo "install-deps: unknown option $option (--clang, --train, --browser)" >&2; exit 2 ;;
  esac
done

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
log_dir=${MOEQUANT_LOG_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/moequant}
mkdir -p "$log_dir"
log="$log_dir/install-deps.log"
: >"$log"
step() {  # step DESCRIPTION COMMAND...: one line on screen, the command's output in the log
  local what=$1 start=$SECONDS status=0
  shift
  printf 'install-deps: %s ... ' "$what"
  echo "==> $what: $*" >>"$log"
  "$@" >>"$log" 2>&1 || status=$?
  if ((status == 0)); then
    echo "done ($((SECONDS - start)) s)"
    return
  fi
  echo "failed (exit $status)"
  echo "install-deps: the log of this run, $log:" >&2
  cat "$log" >&2
  exit "$status"
}
echo "install-deps: ${#missing[@]} of ${#packages[@]} packages to install: ${missing[*]} (log: $log)"
step "updating the package lists" "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
step "installing ${#missing[@]} package(s)" \
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
