#!/usr/bin/env bash
# Fetches, here, the Debian packages the GPU machine lacks (libconfig, cmocka, OpenSSL,
# ISA-L, pkg-config; iproute2 for tests/e2e/netns.sh) into .device-deps/debs, which git ignores and the device tool
# carries; tools/gpu_device_run.sh unpacks them there. Run once per checkout.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$here/.device-deps/debs"
cd "$here/.device-deps/debs"
pkgs=(libconfig9 libconfig-dev libcmocka0 libcmocka-dev pkgconf pkgconf-bin libpkgconf3
      iproute2 libbpf1 libmnl0 libxtables12 libisal2 libisal-dev libssl-dev libssl3)
missing=()
for p in "${pkgs[@]}"; do
    ls "${p}"_*.deb >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] || { echo "device_deps.sh: already there: $(ls | tr '\n' ' ')"; exit 0; }
apt-get update -qq
apt-get download "${missing[@]}"
ls -l
