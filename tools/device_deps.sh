#!/usr/bin/env bash
# Fetches, here, the Debian packages the GPU machine lacks (libconfig, cmocka,
# pkg-config) into .device-deps/debs, which git ignores and the device tool
# carries; tools/gpu_device_run.sh unpacks them there. Run once per checkout.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$here/.device-deps/debs"
cd "$here/.device-deps/debs"
[ -n "$(ls -A . 2>/dev/null)" ] && { echo "device_deps.sh: already there: $(ls | tr '\n' ' ')"; exit 0; }
apt-get update -qq
apt-get download libconfig9 libconfig-dev libcmocka0 libcmocka-dev pkgconf pkgconf-bin libpkgconf3
ls -l
