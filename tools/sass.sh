#!/usr/bin/env bash
# sass.sh -- the SASS of one .cu file for the H200 (sm_90), here, without a
# GPU: compiled with the build's nvcc flags (third_party/cuda/cuda.bzl),
# disassembled with line info, printed on stdout. Pipe it to
# tools/sass_stack.py for where the stack is touched and which poll loops
# reload what they wait for:
#
#   tools/sass.sh persistent/megakernel.cu | tools/sass_stack.py -p
#   tools/sass.sh snac/latency_kernels.cu -DSOMETHING > /tmp/x.sass
#
# This machine's CUDA 13 toolkit has no nvdisasm or cuobjdump. The first
# run fetches Debian's CUDA 11.8 toolkit package (non-free, ~80 MB, checked
# against its SHA-256) into ~/.cache/purlin-sass and keeps its nvdisasm.
# That nvdisasm decodes sm_90 instructions but not the ELF header that
# CUDA 12.8+ writes (ABI version 8, the architecture moved in e_flags), so
# the cubin's header is rewritten to the old layout first; the sections
# and instructions are untouched. Where a toolkit's own nvdisasm reads the
# cubin as it is (PURLIN_NVDISASM, or nvdisasm on PATH), that one is used.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
[ $# -ge 1 ] || { echo "usage: tools/sass.sh file.cu [nvcc flags...]" >&2; exit 2; }
src=$1
shift

cache=${XDG_CACHE_HOME:-$HOME/.cache}/purlin-sass
deb=nvidia-cuda-toolkit_11.8.89~11.8.0-5~deb12u1_amd64.deb
sha=d1156026e704fe0368b6295db06224ed00a727966fb13454f34e3f3102db0457

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nvcc -cubin -std=c++17 -O3 -lineinfo -arch=sm_90 -I. -Iruntime "$@" -o "$tmp/x.cubin" "$src"

dis=${PURLIN_NVDISASM:-$(command -v nvdisasm || true)}
if [ -n "$dis" ] && "$dis" -g -c "$tmp/x.cubin" 2>/dev/null; then
  exit 0
fi

dis=$cache/nvdisasm
if [ ! -x "$dis" ]; then
  mkdir -p "$cache"
  echo "sass.sh: fetching Debian's $deb for its nvdisasm (once)" >&2
  curl -fsSL -o "$tmp/$deb" "http://deb.debian.org/debian/pool/non-free/n/nvidia-cuda-toolkit/$deb"
  echo "$sha  $tmp/$deb" | sha256sum -c --quiet -
  dpkg-deb --fsys-tarfile "$tmp/$deb" | tar -x -C "$tmp" ./usr/bin/nvdisasm
  mv "$tmp/usr/bin/nvdisasm" "$dis"
fi

# The pre-12.8 header: EI_ABIVERSION 7, and e_flags = sm | (virtual sm << 16)
# | EF_CUDA_TEXMODE_UNIFIED (0x100) | EF_CUDA_64BIT_ADDRESS (0x400).
python3 - "$tmp/x.cubin" <<'EOF'
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
assert b[:4] == b"\x7fELF" and b[4] == 2, "not a 64-bit ELF"
if b[8] >= 8:
    sm = (struct.unpack_from("<I", b, 0x30)[0] >> 8) & 0xFF
    b[8] = 7
    struct.pack_into("<I", b, 0x30, sm | (sm << 16) | 0x500)
open(p, "wb").write(b)
EOF
# nvdisasm warns once per jump table it cannot resolve; the SASS is whole.
"$dis" -g -c "$tmp/x.cubin" 2>/dev/null
