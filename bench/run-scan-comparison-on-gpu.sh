#!/usr/bin/env bash
# A kernel change that must keep every bit, checked and timed in one device call (about 9 minutes on an H200):
# build this tree and OLD_TREE (an export of the commit before the change, e.g.
# `git archive BASE | tar -x -C .gpu/old --exclude=bench/results`, with this tree's backward_scan_probe.cu copied in
# if BASE's lacks HAWK_PROBE_DUMP) side by side; dump the default forward's and backward's outputs of both through
# the scan probe at its seven problems and compare them byte for byte (dump_compare.txt: "same" or "DIFFER"); then
# the scan probe's variants, bench_rglru, the Hopper, gate-residual and RG-LRU suites. Catch2 comes from the Debian
# package carried in .gpu/ (GPU.md). HAWK_COMMIT names the commit in the benchmark's JSON (the device copy's .git
# may be stale). Eight files come back through the device tool: write OUTDIR under $OUT.
#
#   HAWK_COMMIT=abc1234 bench/run-scan-comparison-on-gpu.sh OUTDIR OLD_TREE
set -u
# shellcheck source=bench/device_call.sh
source "$(dirname "$0")/device_call.sh"  # ensure_catch2, build_tree, gpu_binary, compare_dumps
out=${1:?usage: bench/run-scan-comparison-on-gpu.sh OUTDIR OLD_TREE}
old=${2:?usage: bench/run-scan-comparison-on-gpu.sh OUTDIR OLD_TREE}
mkdir -p "$out"
cd "$(dirname "$0")/.."
t0=$(date +%s)
ensure_catch2 || exit 2
: > /tmp/build-old.log
( build_tree "$old" /tmp/build-old 5 /tmp/build-old.log backward_scan_probe
  echo "old build rc=$? $(( $(date +%s) - t0 )) s" ) &
: > "$out/build.log"
build_tree . build-gpu 14 "$out/build.log" hawk_gpu_rglru hawk_gpu_rglru_sm90a hawk_gpu_gate_residual bench_rglru \
  backward_scan_probe || grep -E "error" -A3 "$out/build.log" | head -n 40
echo "new build $(( $(date +%s) - t0 )) s"
wait
status=0
mkdir -p /tmp/dumps
HAWK_PROBE_FILTER=no-variant HAWK_PROBE_DUMP=/tmp/dumps/old timeout 100 "$(gpu_binary backward_scan_probe /tmp/build-old)" \
  > /tmp/old_probe.txt 2>&1 || status=1
HAWK_PROBE_DUMP=/tmp/dumps/new timeout 150 "$(gpu_binary backward_scan_probe)" "$out/scan_probe.json" \
  > "$out/scan_probe.txt" 2>&1 || status=1
compare_dumps /tmp/dumps > "$out/dump_compare.txt" || status=1
cat "$out/dump_compare.txt"
timeout 200 "$(gpu_binary bench_rglru)" "$out/bench_rglru.json" > "$out/bench_rglru.log" 2>&1 || status=1
grep -E "^fwd\+bwd (fused|logits) canonical|least|^bwd alone" "$out/bench_rglru.log"
for suite in hawk_gpu_rglru_sm90a hawk_gpu_gate_residual hawk_gpu_rglru; do
  timeout 170 "$(gpu_binary $suite)" > "/tmp/$suite.txt" 2>&1 || status=1
  echo "$suite: $(tail -n 2 /tmp/$suite.txt | head -n 1)" | tee -a "$out/suites.txt"
done
nvidia-smi --query-gpu=name,driver_version --format=csv > "$out/gpu.txt"
echo "total $(( $(date +%s) - t0 )) s"
exit $status
