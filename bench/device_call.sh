# Sourced by the device scripts (bench/run-*-on-gpu.sh): Catch2 from the Debian package carried in .gpu/ (GPU.md),
# for all of them; the output folder and the call's time budget, for those that take OUTDIR [SECONDS] (a script that
# keeps its own `left` defines it after sourcing this). Not executable on its own.
#
#   source "$(dirname "$0")/device_call.sh"
#   device_call_begin "bench/run-x-on-gpu.sh OUTDIR [SECONDS]" "$@"   # sets out (absolute), budget, t0; cd to the root
#   left                                                               # seconds of the budget left
#   ensure_catch2 || exit 2
#   build_gpu LOG TARGET... || exit 1                                  # configure build-gpu, build TARGETs, log to LOG
#   build_tree SOURCE BUILD JOBS LOG TARGET...                         # the same for another tree and build folder
#   gpu_binary NAME [BUILD]                                            # the path of build-gpu's (BUILD's) executable
#   compare_dumps DIR > REPORT || status=1                             # DIR/old_* against DIR/new_*, byte for byte
#   sanitize_cases SUITE FILTER LOGS || status=1                       # needs device_call_begin's budget
#   with_clock_log FILE COMMAND...                                     # COMMAND with the GPU's clocks logged to FILE
#   nsight_tool ncu|nsys                                               # the tool's path, empty where there is none

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

# The tree SOURCE configured into BUILD as the device scripts build (Release, the probes on, Catch2 from
# ensure_catch2), then TARGETs built on JOBS cores; both steps' output appended to LOG.
build_tree() {
  local source=$1 build=$2 jobs=$3 log=$4
  shift 4
  cmake -S "$source" -B "$build" -G Ninja -DCMAKE_PREFIX_PATH=/opt/catch2/usr -DCMAKE_BUILD_TYPE=Release \
    -DHAWK_BUILD_PROBES=ON >> "$log" 2>&1 && cmake --build "$build" -j "$jobs" --target "$@" >> "$log" 2>&1
}

# This tree's build-gpu, on every core. Kept between calls while the machine is warm, so a later call's targets
# build incrementally.
build_gpu() {
  local log=$1
  shift
  build_tree . build-gpu "$(nproc)" "$log" "$@"
}

# The executable NAME of BUILD (default: this tree's build-gpu, not an old tree built beside it in build-gpu/old-tree).
gpu_binary() {
  if [ -n "${2-}" ]; then
    find "$2" -name "$1" -type f -perm -u+x 2> /dev/null | head -n 1
  else
    find build-gpu -path build-gpu/old-tree -prune -o -name "$1" -type f -perm -u+x -print 2> /dev/null | head -n 1
  fi
}

# The scan probe's dumps of two builds (HAWK_PROBE_DUMP=DIR/old and DIR/new) compared byte for byte: one line a
# problem, "same NAME BYTES bytes" or "DIFFER NAME". Non-zero when any differs or there is no old dump at all.
compare_dumps() {
  local dir=$1 f name status=0
  ls "$dir"/old_* > /dev/null 2>&1 || { echo "no dumps in $dir"; return 1; }
  for f in "$dir"/old_*; do
    name=${f#"$dir"/old_}
    if cmp -s "$f" "$dir/new_$name"; then echo "same $name $(stat -c %s "$f") bytes"; else echo "DIFFER $name"; status=1; fi
  done
  return $status
}

# The path of an Nsight tool (ncu or nsys): on PATH, else where the Nsight and CUDA installers put it; empty where the
# machine has none.
nsight_tool() {
  command -v "$1" 2> /dev/null && return 0
  ls /opt/nvidia/nsight-compute/*/"$1" /opt/nvidia/nsight-systems/*/bin/"$1" /usr/local/cuda/bin/"$1" 2> /dev/null |
    head -n 1
}

# COMMAND... run with the GPU's SM clock, power and throttle reasons sampled into FILE every 100 ms (nvidia-smi in the
# background; FILE left empty where the machine has no nvidia-smi), so that a benchmark's numbers come with the clocks
# they ran at: an H100 looping the backward at (1, 65536, 2560, 10) sits at its 700 W cap, at about 1755 MHz instead
# of 1980 (docs/PERFORMANCE_NOTES.md, thirty-seventh session). Returns COMMAND's exit status.
with_clock_log() {
  local file=$1 sampler= rc
  shift
  : > "$file"
  if command -v nvidia-smi > /dev/null 2>&1; then
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
      --format=csv -lms 100 > "$file" 2>&1 &
    sampler=$!
  fi
  "$@"
  rc=$?
  if [ -n "$sampler" ]; then
    kill "$sampler" 2> /dev/null
    wait "$sampler" 2> /dev/null
  fi
  return "$rc"
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
