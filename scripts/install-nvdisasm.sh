#!/usr/bin/env bash
# Puts a SASS disassembler (nvdisasm and cuobjdump of CUDA 11.8, Debian
# bookworm's non-free nvidia-cuda-toolkit package) in DIR/bin, without
# installing the package: CUDA 13 as shipped here has ptxas but no
# disassembler, and scripts/sass.py needs one to show what ptxas made of a
# kernel (instruction mix, uniform-datapath moves, spills) on a machine with
# no GPU.
#   bash scripts/install-nvdisasm.sh [DIR]      (default: tools/cuda-11.8)
# Needs Debian's archive (deb.debian.org); not part of the build or of CI.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-$ROOT/tools/cuda-11.8}
if [ -x "$DIR/bin/nvdisasm" ]; then echo "$DIR/bin/nvdisasm"; exit 0; fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
mkdir -p "$T/etc" "$T/state/lists/partial" "$T/cache/archives/partial"
cat > "$T/etc/nonfree.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
APT=(-o Dir::Etc::sourcelist="$T/etc/nonfree.sources" -o Dir::Etc::sourceparts=-
     -o Dir::State="$T/state" -o Dir::Cache="$T/cache"
     -o APT::Sandbox::User=root)
apt-get "${APT[@]}" update -qq
(cd "$T" && apt-get "${APT[@]}" download nvidia-cuda-toolkit)
dpkg -x "$T"/nvidia-cuda-toolkit_*.deb "$T/x"
mkdir -p "$DIR/bin"
cp "$T/x/usr/bin/nvdisasm" "$T/x/usr/bin/cuobjdump" "$DIR/bin/"
echo "$DIR/bin/nvdisasm"
