#!/usr/bin/env bash
# Installs what building and testing mla needs on a bare Debian 12 machine,
# and nothing when it is already there (so `make` stays fast on a dev box).
set -euo pipefail

# python3-torch (Debian's CPU-only 1.13): the torch code paths' tests (73 of
# test/python) skip without it; the suite passes either way.
PKGS=(llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools cmake ninja-build g++
      python3 python3-numpy python3-pytest python3-pip python3-torch zlib1g-dev libzstd-dev libgtest-dev
      clang-format-22)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
