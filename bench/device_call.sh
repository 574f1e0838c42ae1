# Sourced by the device scripts (bench/run-*-on-gpu.sh): Catch2 from the Debian package carried in .gpu/ (GPU.md),
# for all of them; the output folder and the call's time budget, for those that take OUTDIR [SECONDS] (a script that
# keeps its own `left` defines it after sourcing this). Not executable on its own.
#
#   source "$(dirname "$0")/device_call.sh"
#   device_call_begin "bench/run-x-on-gpu.sh OUTDIR [SECONDS]" "$@"   # sets out (absolute), budget, t0; cd to the root
#   left                                                               # seconds of the budget left
#   ensure_catch2 || exit 2
#   build_gpu LOG TARGET... || exit 1                                  # configure build-gpu, build TARGETs, log to LOG
#   gpu_binary NAME                                                    # the path of build-gpu's executable NAME
#   sanitize_cases SUITE FILTER LOGS || status=1                       # needs device_call_begin's budget

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

# build-gpu as the device scripts share it (Release, the probes on, Catch2 from ensure_catch2): configure, then build
# TARGETs; both steps' output appended to LOG. Kept between calls while the machine is warm, so a later call's
# targets build incrementally.
build_gpu() {
  local log=$1
  shift
  cmake -S . -B build-gpu -G Ninja -DCMAKE_PREFIX_PATH=/opt/catch2/usr -DCMAKE_BUILD_TYPE=Release \
    -DHAWK_BUILD_PROBES=ON >> "$log" 2>&1 && cmake --build build-gpu -j "$(nproc)" --target "$@" >> "$log" 2>&1
}

# The executable NAME of this tree's build (not of an old tree built beside it in build-gpu/old-tree).
gpu_binary() {
  find build-gpu -path build-gpu/old-tree -prune -o -name "$1" -type f -perm -u+x -print 2> /dev/null | head -n 1
}

# compute-sanitizer's memcheck, racecheck, initcheck and synccheck over the Catch2 cases of SUITE that FILTER names
# (a Python regex over their names, tests/run_sanitizer.py), within what is left of the call's budget; the report into $out/sanitizer.txt, each case's
# log under LOGS. Returns non-zero when a case failed or the time ran out.
sanitize_cases() {
  local suite=$1 filter=$2 logs=$3
  timeout "$(( $(left) - 10 ))" python3 tests/run_sanitizer.py --tool memcheck --tool racecheck --tool initcheck \
    --tool synccheck --jobs "$(nproc)" --filter "$filter" --logs "$logs" "$suite" > "$out/sanitizer.txt" 2>&1
  local status=$?
  tail -n 1 "$out/sanitizer.txt"
  return $status
}
