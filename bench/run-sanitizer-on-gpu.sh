#!/usr/bin/env bash
# compute-sanitizer's four tools (memcheck, racecheck, initcheck, synccheck) over chosen cases of the RG-LRU suite,
# in one device call: builds hawk_gpu_rglru in build-gpu (kept from an earlier call on a warm machine, e.g.
# bench/run-scan-comparison-on-gpu.sh's) and runs tests/run_sanitizer.py over the Catch2 cases FILTER names, while the
# call's budget lasts. Catch2 comes from the Debian package carried in .gpu/ (GPU.md).
#
#   bench/run-sanitizer-on-gpu.sh OUTDIR FILTER [SECONDS]   # FILTER: a Python regex over the cases' names (not tags),
#                                                            # e.g. 'scan width|ordered sum|compact'; SECONDS: 540
#
# Writes OUTDIR/build.log, sanitizer.txt and gpu.txt. Exit status: 0 when the build and every sanitized case passed.
set -uo pipefail
# shellcheck source=bench/device_call.sh
source "$(dirname "$0")/device_call.sh"
filter=${2:?usage: bench/run-sanitizer-on-gpu.sh OUTDIR FILTER [SECONDS]}
device_call_begin "bench/run-sanitizer-on-gpu.sh OUTDIR FILTER [SECONDS]" "$1" "${3:-540}" || exit 2
ensure_catch2 || exit 2
build_gpu "$out/build.log" hawk_gpu_rglru || { grep -E "error" -A3 "$out/build.log" | head -n 40; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
suite=$(gpu_binary hawk_gpu_rglru)
status=0
sanitize_cases "$suite" "$filter" /tmp/sanitize-logs || status=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt" 2>&1
echo "total $(( $(date +%s) - t0 )) s"
exit $status
