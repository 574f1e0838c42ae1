#!/usr/bin/env bash
# The RG-LRU suite with the default dispatch sized for 99 KB of shared memory per CTA (an L40S, RTX 4090 or RTX 5090:
# HAWK_SHARED_MEMORY_LIMIT=101376), on an H200, in one device call (about 7 minutes): every case that goes through
# the dispatch then runs the compact configurations where a shipped one does not fit, and none of the Hopper
# kernels. Then compute-sanitizer's four tools over the [compact] cases (SANITIZE_FILTER overrides the cases; set it
# to "" to skip) while the device time lasts. Catch2 comes from the Debian package carried in .gpu/ (GPU.md).
#
#   bench/run-capped-suite-on-gpu.sh OUTDIR [SECONDS]      # SECONDS: the whole call's budget (default 540)
#
# Writes OUTDIR/configure.log, build.log, suite_capped.txt (Catch2's case durations and summary), sanitizer.txt and
# gpu.txt. Exit status: 0 when the build, the suite and the sanitizer (if run) passed.
set -uo pipefail
# shellcheck source=bench/device_call.sh
source "$(dirname "$0")/device_call.sh"
device_call_begin "bench/run-capped-suite-on-gpu.sh OUTDIR [SECONDS]" "$@" || exit 2
ensure_catch2 || exit 2
cmake -S . -B build-capped -G Ninja -DCMAKE_PREFIX_PATH=/opt/catch2/usr -DCMAKE_BUILD_TYPE=Release \
  -DHAWK_SHARED_MEMORY_LIMIT=101376 > "$out/configure.log" 2>&1 || { tail -n 20 "$out/configure.log"; exit 1; }
cmake --build build-capped -j "$(nproc)" --target hawk_gpu_rglru > "$out/build.log" 2>&1 ||
  { grep -E "error" -A3 "$out/build.log" | head -n 40; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
suite=$(find build-capped -name hawk_gpu_rglru -type f -perm -u+x | head -n 1)
status=0
timeout "$(( $(left) - 20 ))" "$suite" -d yes > "$out/suite_capped.txt" 2>&1 || status=1
echo "capped suite: $(tail -n 2 "$out/suite_capped.txt" | head -n 1) ($(( $(date +%s) - t0 )) s)"
filter=${SANITIZE_FILTER-compact}
if [ -n "$filter" ] && [ "$(left)" -gt 60 ]; then
  sanitize_cases "$suite" "$filter" /tmp/capped-sanitize || status=1
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt" 2>&1
echo "total $(( $(date +%s) - t0 )) s"
exit $status
