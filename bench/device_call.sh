# Sourced by the device scripts (bench/run-*-on-gpu.sh): Catch2 from the Debian package carried in .gpu/ (GPU.md),
# for all of them; the output folder and the call's time budget, for those that take OUTDIR [SECONDS] (a script that
# keeps its own `left` defines it after sourcing this). Not executable on its own.
#
#   source "$(dirname "$0")/device_call.sh"
#   device_call_begin "bench/run-x-on-gpu.sh OUTDIR [SECONDS]" "$@"   # sets out (absolute), budget, t0; cd to the root
#   left                                                               # seconds of the budget left
#   ensure_catch2 || exit 2

device_call_begin() {
  local usage=$1
  shift
  out=${1:?usage: $usage}
  budget=${2:-540}
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  cd "$(dirname "${BASH_SOURCE[0]}")/.." || return 1
  t0=$(date +%s)
}

left() { echo $(( budget - ($(date +%s) - t0) )); }

ensure_catch2() {
  [ -d /opt/catch2/usr/include/catch2 ] && return 0
  local deb
  deb=$(ls .gpu/catch2_*.deb 2>/dev/null | head -n 1)
  [ -n "$deb" ] || { echo "no Catch2 package in .gpu/ (copy ../shared/debs/*.deb there)" >&2; return 1; }
  dpkg -x "$deb" /opt/catch2
}
