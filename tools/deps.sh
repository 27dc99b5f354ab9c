#!/usr/bin/env bash
# deps.sh - install, with apt-get and only when missing, every Debian package
# that hive's build, tests, benches and demo need. Safe to run repeatedly:
# when everything is present it only asks dpkg.
set -euo pipefail
pkgs=(
  build-essential g++ make pkg-config
  liburcu-dev libhwloc-dev libnuma-dev    # the library's own dependencies
  libudev-dev                             # hwloc's private link flags (pkg-config --static)
  libcmocka-dev                           # tests
  clang libclang-rt-14-dev                # fuzz targets (libFuzzer, run by make test and make fuzz)
  libbenchmark-dev                        # benches (C++ library behind bench/shim.cc)
  libtbb-dev libcaf-dev libck-dev libconcurrentqueue-dev   # peers measured side by side
  python3-numpy                           # the multiprocessing.shared_memory peer
  python3-matplotlib                      # the bench report's charts (tools/bench-report.py)
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
