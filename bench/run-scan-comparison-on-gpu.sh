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
source "$(dirname "$0")/device_call.sh"  # ensure_catch2, compare_dumps
out=${1:?usage: bench/run-scan-comparison-on-gpu.sh OUTDIR OLD_TREE}
old=${2:?usage: bench/run-scan-comparison-on-gpu.sh OUTDIR OLD_TREE}
mkdir -p "$out"
cd "$(dirname "$0")/.."
t0=$(date +%s)
ensure_catch2 || exit 2
flags=(-G Ninja -DCMAKE_PREFIX_PATH=/opt/catch2/usr -DCMAKE_BUILD_TYPE=Release -DHAWK_BUILD_PROBES=ON)
( cmake -S "$old" -B /tmp/build-old "${flags[@]}" > /tmp/build-old.log 2>&1 &&
  cmake --build /tmp/build-old -j 5 --target backward_scan_probe >> /tmp/build-old.log 2>&1
  echo "old build rc=$? $(( $(date +%s) - t0 )) s" ) &
cmake -S . -B build-gpu "${flags[@]}" > "$out/configure.log" 2>&1
cmake --build build-gpu -j 14 --target hawk_gpu_rglru hawk_gpu_rglru_sm90a hawk_gpu_gate_residual bench_rglru \
  backward_scan_probe > "$out/build.log" 2>&1 || grep -E "error" -A3 "$out/build.log" | head -n 40
echo "new build $(( $(date +%s) - t0 )) s"
wait
find_binary() { find "$1" -name "$2" -type f -perm -u+x | head -n 1; }
status=0
mkdir -p /tmp/dumps
HAWK_PROBE_FILTER=no-variant HAWK_PROBE_DUMP=/tmp/dumps/old timeout 100 "$(find_binary /tmp/build-old backward_scan_probe)" \
  > /tmp/old_probe.txt 2>&1 || status=1
HAWK_PROBE_DUMP=/tmp/dumps/new timeout 150 "$(find_binary build-gpu backward_scan_probe)" "$out/scan_probe.json" \
  > "$out/scan_probe.txt" 2>&1 || status=1
compare_dumps /tmp/dumps > "$out/dump_compare.txt" || status=1
cat "$out/dump_compare.txt"
timeout 200 "$(find_binary build-gpu bench_rglru)" "$out/bench_rglru.json" > "$out/bench_rglru.log" 2>&1 || status=1
grep -E "^fwd\+bwd (fused|logits) canonical|least|^bwd alone" "$out/bench_rglru.log"
for suite in hawk_gpu_rglru_sm90a hawk_gpu_gate_residual hawk_gpu_rglru; do
  timeout 170 "$(find_binary build-gpu $suite)" > "/tmp/$suite.txt" 2>&1 || status=1
  echo "$suite: $(tail -n 2 /tmp/$suite.txt | head -n 1)" | tee -a "$out/suites.txt"
done
nvidia-smi --query-gpu=name,driver_version --format=csv > "$out/gpu.txt"
echo "total $(( $(date +%s) - t0 )) s"
exit $status
