#!/usr/bin/env bash
# One-time set-up on a fresh Debian/Ubuntu machine: installs Bazel (Debian's
# bazel-bootstrap, 4.2.3) when it is missing and checks that a CUDA toolkit is
# there (CUDA_PATH, else /usr/local/cuda). Idempotent; prints what it did.
set -euo pipefail

if ! command -v bazel >/dev/null 2>&1; then
  echo "setup: installing bazel-bootstrap from the distribution's packages"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends bazel-bootstrap >/dev/null
fi

# tools/test.sh's sanitizer passes need gcc's ASan, UBSan and TSan runtimes.
probe=$(mktemp)
if ! echo 'int main(void){return 0;}' |
  gcc -x c -fsanitize=address,undefined - -o "$probe" >/dev/null 2>&1 ||
  ! echo 'int main(void){return 0;}' | gcc -x c -fsanitize=thread - -o "$probe" >/dev/null 2>&1; then
  echo "setup: installing gcc's sanitizer runtimes"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  # The runtimes come with gcc's own libgcc-N-dev, whatever N the
  # distribution's gcc is.
  $sudo apt-get install -y -qq --no-install-recommends \
    "libgcc-$(gcc -dumpversion | cut -d. -f1)-dev" >/dev/null ||
    { echo "setup: cannot install gcc's sanitizer runtimes (libasan, libubsan, libtsan)" >&2; exit 1; }
fi
rm -f "$probe"

cuda="${CUDA_PATH:-/usr/local/cuda}"
if [ ! -x "$cuda/bin/nvcc" ]; then
  echo "setup: no CUDA toolkit at $cuda (bin/nvcc missing); install CUDA 13 or set CUDA_PATH" >&2
  exit 1
fi
echo "setup: bazel at $(command -v bazel), CUDA toolkit at $cuda ($("$cuda/bin/nvcc" --version | tail -n 2 | head -n 1))"
