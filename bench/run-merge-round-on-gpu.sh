#!/usr/bin/env bash
# What a kernel branch needs before it is merged, in as few device calls as the machine allows, the most telling
# results first: build the suites, probes and benchmark in build-gpu (kept between calls while the machine is warm);
# run the probes named in PROBES (each prints "same" or "DIFFER" beside its timings, and fails on a difference); the
# RG-LRU suite's cases for the change (the Catch2 test spec FIRST, e.g. '[scan_width],[compact],[ordered_sum]'), then
# the rest of that suite, the Hopper, core and gate-residual suites; then bench_rglru. Each step runs only while the
# call's budget lasts and copies its files to OUTDIR as soon as it ends (so that a call cut short still returns what
# it did). The steps' record stays in build-gpu/merge-round/ on the machine: a later call on the same warm machine
# (the device tool's $OUT is empty at each call) runs only the steps without a verdict and returns every file again;
# call until `merge_round.txt` says "done". A fresh machine starts from the build.
#
# A change that must keep every bit: HAWK_OLD_TREE names an export of the commit before it inside the tree that
# travels (e.g. `git archive main | tar -x -C .gpu/old --exclude=bench/results`); the build step then also builds that
# tree's scan probe (build-gpu/old-tree), and a first step, same_bits, dumps the default forward's and backward's
# outputs of both builds at the probe's problems and compares them byte for byte (same_bits.txt: "same" or "DIFFER"
# for each). With HAWK_OLD_BENCH=1 as well, the old tree's bench_rglru is built beside it and run after the new one
# (bench_rglru_old.json / .log; HAWK_OLD_COMMIT names its commit), so that the benchmark's comparison comes from one
# machine, whatever GPU the call got.
#
#   [HAWK_OLD_TREE=.gpu/old] HAWK_COMMIT=abc1234 bench/run-merge-round-on-gpu.sh OUTDIR [SECONDS] [FIRST] [PROBES]
#       HAWK_OTHER_SUITES: the suites run after the RG-LRU suite (default "hawk_gpu_rglru_sm90a hawk_gpu_core
#       hawk_gpu_gate_residual"; "" for none, when device time is short and the change is the RG-LRU operators');
#       HAWK_BENCH_EARLY=1: bench_rglru right after FIRST's cases, before the rest of the suite
#       SECONDS: the call's budget (540); FIRST: a Catch2 spec run before the rest of the RG-LRU suite ("" for none);
#       PROBES: probe targets to build and run first, space-separated (e.g. ordered_sum_probe; default none)
#
# Files (all in OUTDIR/merge_round.tgz; merge_round.txt and same_bits.txt also beside it): merge_round.txt (one line
# per step: passed / FAILED / skipped, seconds), build.log, same_bits.txt, <probe>.txt and .json, suite_first.txt,
# suite_rest.txt, suite_<name>.txt (Catch2 with case durations), bench_rglru.json / .log / _clocks.csv (the GPU's
# clocks and power while it ran: with_clock_log), gpu.txt.
# Catch2 comes from the Debian package carried in .gpu/ (GPU.md); the device copy's .git may be stale, so HAWK_COMMIT
# names the commit in the benchmark's JSON. Exit status 0 when every step that ran passed.
set -uo pipefail
# shellcheck source=bench/device_call.sh
source "$(dirname "$0")/device_call.sh"  # device_call_begin (out, budget, t0), left, ensure_catch2, build_gpu
# shellcheck disable=SC2154
device_call_begin "bench/run-merge-round-on-gpu.sh OUTDIR [SECONDS] [FIRST] [PROBES]" "${1:-}" "${2:-540}" || exit 2
first=${3-}
probes=${4-}
ensure_catch2 || exit 2
returned=$out          # what the device tool brings back
out=build-gpu/merge-round  # the round's files, kept between calls on a warm machine
mkdir -p "$out"
out=$(cd "$out" && pwd)
log="$out/merge_round.txt"
touch "$log"
echo "call at $(date -u +%FT%TZ), ${budget} s" >> "$log"
status=0
steps=()

# What the device tool brings back: every file of the round in one archive, merge_round.tgz (the tool returns only
# a few files a call, and dropped the rest on 2026-12-05), beside the round's log and same_bits.txt to read at once.
return_files() {
  tar -czf "$returned/merge_round.tgz" -C "$out" . 2> /dev/null
  cp "$out/merge_round.txt" "$returned/"
  [ -f "$out/same_bits.txt" ] && cp "$out/same_bits.txt" "$returned/"
  return 0
}
# A step with a verdict from an earlier call (passed or FAILED) is not run again.
has_verdict() { grep -qE "^$1 (passed|FAILED)" "$log"; }
record() {  # step, rc, seconds
  local verdict=passed
  [ "$2" -eq 0 ] || { verdict=FAILED; status=1; }
  echo "$1 $verdict $3 s" | tee -a "$log"
  return_files
}
# step NAME NEED COMMAND: run the shell command string COMMAND (bash -c, so that timeout can stop it; it sees the
# exported variables below) if NAME has no verdict yet and at least NEED seconds are left, with `left - 10` seconds;
# a command the budget stops gets no verdict (a later call runs it again), any other exit status is its verdict.
step() {
  local name=$1 need=$2 command=$3
  steps+=("$name")
  if has_verdict "$name"; then
    grep -qE "^$name FAILED" "$log" && status=1
    return 0
  fi
  if [ "$(left)" -lt "$need" ]; then
    echo "$name skipped ($(left) s left, needs $need)" | tee -a "$log"
    return 0
  fi
  local s0 rc
  s0=$(date +%s)
  timeout "$(( $(left) - 10 ))" bash -c "$command"
  rc=$?
  if [ "$rc" -eq 124 ]; then  # stopped by the call's budget: no verdict, so the next call runs it again
    echo "$name cut by the budget after $(( $(date +%s) - s0 )) s" | tee -a "$log"
    return_files
    return 0
  fi
  record "$name" "$rc" "$(( $(date +%s) - s0 ))"
}
old_tree=${HAWK_OLD_TREE-}
if [ -n "$old_tree" ]; then
  [ -f "$old_tree/CMakeLists.txt" ] || { echo "HAWK_OLD_TREE=$old_tree: no CMakeLists.txt there" >&2; exit 2; }
  case " $probes " in *" backward_scan_probe "*) ;; *) probes="backward_scan_probe $probes" ;; esac
fi
other_suites=${HAWK_OTHER_SUITES-hawk_gpu_rglru_sm90a hawk_gpu_core hawk_gpu_gate_residual}
export out probes old_tree HAWK_OLD_BENCH other_suites
export -f build_tree build_gpu gpu_binary compare_dumps with_clock_log  # for the steps' bash -c

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt" 2>&1
# The probes and the RG-LRU suite first: a call cut short in the second build still runs them on the next call. The
# old tree's probe builds beside them, on a third of the cores.
step build 120 ': > "$out/build.log"
  old_build=
  if [ -n "$old_tree" ]; then
    : > "$out/build_old.log"
    old_targets="backward_scan_probe"
    [ "${HAWK_OLD_BENCH-}" = 1 ] && old_targets="$old_targets bench_rglru"
    build_tree "$old_tree" build-gpu/old-tree $(( $(nproc) / 3 + 1 )) "$out/build_old.log" $old_targets &
    old_build=$!
  fi
  build_gpu "$out/build.log" $probes hawk_gpu_rglru &&
  build_gpu "$out/build.log" $other_suites bench_rglru
  new=$?
  if [ -n "$old_build" ] && ! wait "$old_build"; then echo "the old tree did not build (build_old.log)"; exit 1; fi
  exit $new'
if ! grep -qE "^build passed" "$log"; then
  grep -E "error" -A3 "$out/build.log" | head -n 40
  return_files
  exit 1
fi

if [ -n "$old_tree" ]; then  # every output of the default forward and backward, byte for byte
  step same_bits 150 'mkdir -p build-gpu/dumps && rm -f build-gpu/dumps/*
    HAWK_PROBE_FILTER=no-variant HAWK_PROBE_DUMP=build-gpu/dumps/old \
      "$(gpu_binary backward_scan_probe build-gpu/old-tree)" > /dev/null 2>&1 || exit 1
    HAWK_PROBE_FILTER=no-variant HAWK_PROBE_DUMP=build-gpu/dumps/new "$(gpu_binary backward_scan_probe)" \
      > /dev/null 2>&1 || exit 1
    compare_dumps build-gpu/dumps > "$out/same_bits.txt"
    rc=$?
    cat "$out/same_bits.txt"
    exit $rc'
fi

for probe in $probes; do  # a probe fails on a difference of bytes, or prints DIFFER
  step "$probe" 60 "\"$(gpu_binary "$probe")\" \"\$out/$probe.json\" > \"\$out/$probe.txt\" 2>&1 &&
    ! grep -q DIFFER \"\$out/$probe.txt\""
done

export HAWK_COMMIT=${HAWK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
bench_step() {
  step bench_rglru 200 "with_clock_log \"\$out/bench_rglru_clocks.csv\" \"$(gpu_binary bench_rglru)\" \
    \"\$out/bench_rglru.json\" > \"\$out/bench_rglru.log\" 2>&1"
}
suite=$(gpu_binary hawk_gpu_rglru)
if [ -n "$first" ]; then
  step suite_first 60 "\"$suite\" -d yes '$first' > \"\$out/suite_first.txt\" 2>&1"
  [ "${HAWK_BENCH_EARLY-}" = 1 ] && bench_step
  rest="~${first//,/\~}"  # every case outside the first spec's tags
  step suite_rest 150 "\"$suite\" -d yes '$rest' > \"\$out/suite_rest.txt\" 2>&1"
else
  [ "${HAWK_BENCH_EARLY-}" = 1 ] && bench_step
  step suite_rest 150 "\"$suite\" -d yes > \"\$out/suite_rest.txt\" 2>&1"
fi
for other in $other_suites; do
  step "$other" 40 "\"$(gpu_binary "$other")\" -d yes > \"\$out/suite_$other.txt\" 2>&1"
done
[ "${HAWK_BENCH_EARLY-}" = 1 ] || bench_step
if [ -n "$old_tree" ] && [ "${HAWK_OLD_BENCH-}" = 1 ]; then
  old_bench=$(gpu_binary bench_rglru build-gpu/old-tree)
  step bench_rglru_old 200 "HAWK_COMMIT=${HAWK_OLD_COMMIT:-old-tree} with_clock_log \"\$out/bench_rglru_old_clocks.csv\" \
    \"$old_bench\" \"\$out/bench_rglru_old.json\" > \"\$out/bench_rglru_old.log\" 2>&1"
fi

pending=""
for name in "${steps[@]}"; do has_verdict "$name" || pending="$pending $name"; done
if [ -n "$pending" ]; then
  echo "call again, steps left:$pending ($(( $(date +%s) - t0 )) s this call)" | tee -a "$log"
else
  echo "done ($(( $(date +%s) - t0 )) s this call)" | tee -a "$log"
fi
for f in "$out"/suite_*.txt; do [ -f "$f" ] && echo "$(basename "$f"): $(tail -n 2 "$f" | head -n 1)"; done
return_files
exit $status
