#!/usr/bin/env bash
# deps.sh [--list] GROUP... - install, with apt-get and only when missing,
# the Debian packages that a group of make targets needs. Safe to run
# repeatedly: when everything is present it only asks dpkg. --list prints
# the group's packages and installs nothing.
#
#   build   the library, the examples and `make demo`
#   test    build + what `make test` / `make fuzz` add (`make deps`, CI)
#   dashboard  build + what tools/hive-dashboard needs (`make dashboard`)
#   bench   build + the peers `make bench` measures hive against
set -euo pipefail
build=(
  build-essential make pkg-config
  liburcu-dev libhwloc-dev libnuma-dev    # the library's own dependencies
)
test=(
  libcmocka-dev                           # unit and stress tests
  clang libclang-rt-14-dev                # fuzz targets (libFuzzer, run by make test and make fuzz)
  python3-dev python3-numpy python3-pytest python3-setuptools   # the Python module and its tests
  python3-matplotlib                      # tools/hive-trace's picture, checked by test_trace
  tmux                                    # test_top watches hive-top's live screen in a pane
  nodejs npm chromium                     # make dashboard-check: uPlot from npm, the page in a browser
  openmpi-bin libopenmpi-dev              # the MPI layer (libhive-mpi.a) and its mpirun tests
)
dashboard=(
  nodejs npm                              # npm installs uPlot, the page's charts (tools/dashboard)
)
bench=(
  g++ libbenchmark-dev                    # the C++ Google Benchmark harness behind bench/shim.cc
  libtbb-dev libcaf-dev libck-dev libconcurrentqueue-dev   # peers measured side by side
  python3-numpy                           # the multiprocessing.shared_memory peer (bench/peer_shm.py)
  python3-matplotlib                      # the report's charts (tools/bench-report.py)
)
list=0
if [ "${1:-}" = "--list" ]; then list=1; shift; fi
[ $# -gt 0 ] || set -- test
pkgs=("${build[@]}")
for group in "$@"; do
  case $group in
    build) ;;
    test)  pkgs+=("${test[@]}") ;;
    bench) pkgs+=("${bench[@]}") ;;
    dashboard) pkgs+=("${dashboard[@]}") ;;
    *) echo "deps.sh: unknown group '$group' (build, test, bench or dashboard)" >&2; exit 2 ;;
  esac
done
if [ $list -eq 1 ]; then
  echo "${pkgs[*]}"
  exit 0
fi
missing=()
for p in "${pkgs[@]}"; do
  # a Node.js from elsewhere (e.g. NodeSource's, which bundles npm and
  # conflicts with Debian's npm) will do
  case $p in nodejs|npm) command -v npm >/dev/null 2>&1 && continue ;; esac
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
