#!/usr/bin/env bash
# bench_rglru of several trees on one machine, interleaved, so that a merge round's A/B (main, a change, the change
# with one patch taken out, ...) comes from one GPU in as few device calls as the machine allows. Each LABEL=TREE
# names a tree inside the tree that travels (`.` for this one; others exported under .gpu/, e.g.
# `git archive <commit> | tar -x -C .gpu/name --exclude=bench/results`); each is built into build-variants/LABEL
# (`.` into build-gpu), all at once, each on its share of the cores. Then ROUNDS rounds, each running every label's
# bench_rglru once, the order rotated a place each round (so that no label always runs first or last); a run starts
# only while the call's budget holds about one and a half of the longest run so far (30 s before the first), and is
# stopped 5 s before the budget ends (a later call runs it again). The runs' files stay in
# build-gpu/bench-variants/ on the machine: a later call on the same warm machine (the device tool's $OUT is empty at
# each call) builds nothing new, runs only the rounds still missing and returns every file again; call until
# `variants.txt` says "done" (a failed run is not run again; every later call reports it and exits non-zero). A
# fresh machine starts from the builds. The kept runs belong to one set of arguments (build-gpu/bench-variants/args):
# another set on the same warm machine is refused until that folder is removed. Each tree once (an A/A control
# exports the tree twice).
#
#   bench/run-bench-variants-on-gpu.sh OUTDIR SECONDS ROUNDS LABEL=TREE [LABEL=TREE...]
#       e.g. bench/run-bench-variants-on-gpu.sh $OUT/v 560 3 main=.gpu/old change=. without_0001=.gpu/no1
#
# Files: OUTDIR/variants.tgz (every run's bench_rglru_<label>_run<k>.json, .log and .clocks.csv, the GPU's clocks
# and power while it ran: with_clock_log; build logs, gpu.txt) beside
# OUTDIR/variants.txt (one line a step) and OUTDIR/summary.md (bench/summarize_bench_variants.py over the runs so far:
# the median of each label's run medians for every bf16 canonical row). The JSONs name their commit as the label
# (HAWK_COMMIT), so a label should be a commit's short hash where the tree is one. Exit status 0 when every build and
# run that happened passed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)  # before device_call_begin moves to the root
# shellcheck source=bench/device_call.sh
source "$here/device_call.sh"  # device_call_begin, left, ensure_catch2, build_tree, gpu_binary, with_clock_log
usage="bench/run-bench-variants-on-gpu.sh OUTDIR SECONDS ROUNDS LABEL=TREE [LABEL=TREE...]"
# shellcheck disable=SC2154
device_call_begin "$usage" "${1:-}" "${2:-540}" || exit 2
rounds=${3:-}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive integer; usage: $usage" >&2; exit 2; }
shift 3
[ $# -ge 1 ] || { echo "usage: $usage" >&2; exit 2; }
labels=()
trees=()
for pair in "$@"; do
  label=${pair%%=*}
  tree=${pair#*=}
  [[ $pair == *=* && $label =~ ^[A-Za-z0-9_.-]+$ && -n $tree ]] ||
    { echo "not LABEL=TREE (a label of letters, digits, _ . -): $pair" >&2; exit 2; }
  for (( k = 0; k < ${#labels[@]}; ++k )); do
    [ "${labels[$k]}" != "$label" ] || { echo "label $label given twice" >&2; exit 2; }
    # Two labels on one tree would build one folder twice at once: export the tree twice for an A/A control.
    [ "$(cd "${trees[$k]}" && pwd)" != "$(cd "$tree" && pwd)" ] || { echo "tree $tree given twice" >&2; exit 2; }
  done
  [ -d "$tree" ] || { echo "no tree $tree" >&2; exit 2; }
  labels+=("$label")
  trees+=("$tree")
done
ensure_catch2 || exit 2
returned=$out
work="build-gpu/bench-variants"  # kept between calls on a warm machine
mkdir -p "$work"
work=$(cd "$work" && pwd)
# The runs kept here belong to these arguments: another set on the same warm machine must start afresh.
if [ -f "$work/args" ] && [ "$(cat "$work/args")" != "$rounds $*" ]; then
  echo "build-gpu/bench-variants holds the runs of '$(cat "$work/args")', not '$rounds $*': remove it first" >&2
  exit 2
fi
echo "$rounds $*" > "$work/args"
log="$work/variants.txt"
echo "call at $(date -u +%FT%TZ), ${budget} s" >> "$log"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$work/gpu.txt" 2>&1
status=0

# What the device tool brings back, after every step (so that a call cut short still returns what it did).
return_files() {
  tar -czf "$returned/variants.tgz" -C "$work" . 2> /dev/null
  cp "$log" "$returned/"
  python3 "$here/summarize_bench_variants.py" "$work" > "$returned/summary.md" 2>&1 || true
  return 0
}

build_of() {  # the build folder of tree $1 labelled $2 (outside build-gpu, where gpu_binary without a folder looks)
  if [ "$1" = . ]; then echo build-gpu; else echo "build-variants/$2"; fi
}

# The builds, all at once (ninja does nothing where a warm machine built before), stopped 10 s before the budget.
jobs=$(( $(nproc) / ${#labels[@]} ))
[ "$jobs" -ge 1 ] || jobs=1
limit=$(( $(left) - 10 ))
[ "$limit" -ge 1 ] || limit=1
t=$(date +%s)
pids=()
export -f build_tree  # for timeout's bash -c
for i in "${!labels[@]}"; do
  timeout "$limit" bash -c 'build_tree "$@"' _ "${trees[$i]}" "$(build_of "${trees[$i]}" "${labels[$i]}")" \
    "$jobs" "$work/build_${labels[$i]}.log" bench_rglru &
  pids+=($!)
done
for i in "${!labels[@]}"; do
  if wait "${pids[$i]}"; then
    echo "build ${labels[$i]} passed" | tee -a "$log"
  else
    echo "build ${labels[$i]} FAILED or stopped by the budget (build_${labels[$i]}.log)" | tee -a "$log"
    status=1
  fi
done
echo "builds $(( $(date +%s) - t )) s" | tee -a "$log"
return_files
[ "$status" -eq 0 ] || exit 1

# The longest run so far, kept across calls, and at least 30 s before any run has been timed.
longest=$(cat "$work/longest" 2> /dev/null || echo 30)
missing=0
failed=0
for (( r = 1; r <= rounds; ++r )); do
  for (( j = 0; j < ${#labels[@]}; ++j )); do
    i=$(( (j + r - 1) % ${#labels[@]} ))
    label=${labels[$i]}
    name="bench_rglru_${label}_run${r}"
    if [ -s "$work/$name.json" ]; then continue; fi
    if [ -f "$work/$name.failed" ]; then status=1; failed=$(( failed + 1 )); continue; fi
    if [ "$(left)" -lt $(( longest * 3 / 2 + 10 )) ]; then
      missing=$(( missing + 1 ))
      continue
    fi
    if [ "${trees[$i]}" = . ]; then binary=$(gpu_binary bench_rglru); else
      binary=$(gpu_binary bench_rglru "$(build_of "${trees[$i]}" "$label")"); fi
    t=$(date +%s)
    HAWK_COMMIT=$label with_clock_log "$work/$name.clocks.csv" \
      timeout "$(( $(left) - 5 ))" "$binary" "$work/$name.json.part" > "$work/$name.log" 2>&1
    rc=$?
    elapsed=$(( $(date +%s) - t ))
    if [ "$rc" -eq 0 ]; then
      mv "$work/$name.json.part" "$work/$name.json"
      echo "$name passed $elapsed s" | tee -a "$log"
      [ "$elapsed" -le "$longest" ] || { longest=$elapsed; echo "$longest" > "$work/longest"; }
    elif [ "$rc" -eq 124 ]; then  # stopped by the budget: a later call runs it again
      echo "$name stopped by the budget after $elapsed s" | tee -a "$log"
      missing=$(( missing + 1 ))
    else
      echo "$name FAILED $elapsed s ($name.log)" | tee -a "$log"
      touch "$work/$name.failed"  # not run again by a later call, which still reports the failure
      status=1
      failed=$(( failed + 1 ))
    fi
    return_files
  done
done
if [ "$missing" -gt 0 ]; then
  echo "call again, runs left: $missing ($(( $(date +%s) - t0 )) s this call)" | tee -a "$log"
else
  echo "done ($(( $(date +%s) - t0 )) s this call; failed runs: $failed)" | tee -a "$log"
fi
return_files
exit $status
