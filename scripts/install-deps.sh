#!/usr/bin/env bash
# Installs what memlens needs to build and test on Debian 12 (as root, or
# through sudo when there is one). The list is scripts/debian-packages.txt.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
# shellcheck disable=SC2046
$SUDO apt-get install -y --no-install-recommends $(cat "$(dirname "$0")/debian-packages.txt")
