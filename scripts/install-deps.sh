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
# npm for the exports_browser test (speedscope and pprof-format from the npm
# registry). Debian's nodejs ships without it; NodeSource's nodejs bundles it
# and conflicts with Debian's npm package, so it is installed only if missing.
if ! command -v npm > /dev/null; then
    $SUDO apt-get install -y --no-install-recommends npm
fi
