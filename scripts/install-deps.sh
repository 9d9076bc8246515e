#!/usr/bin/env bash
# Installs what memlens needs to build and test on Debian 12 (as root, or
# through sudo when there is one).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends \
  build-essential cmake pkg-config ca-certificates \
  libunwind-dev libdw-dev libelf-dev libzstd-dev libncurses-dev libcriterion-dev \
  libjemalloc-dev libjemalloc2 \
  heaptrack sqlite3 python3 perl git tmux chromium clang \
  libclang-rt-dev python3-jsonschema zstd
