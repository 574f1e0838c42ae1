#!/usr/bin/env bash
# Nsight Compute over one launch of the chunked backward scan in chosen scan-probe rows
# (bench/probes/backward_scan_probe.cu), with where its instructions and stalls go phase by phase
# (bench/probes/sass_phases.py): the measurement that decides what to cut next in a scan kernel (issue 17). Builds
# backward_scan_probe in build-gpu when it is missing (a warm machine keeps it). Each run profiles the fourth launch of
# the kernel in the probe rows its filter selects (the launches before it: the reference backward and warm-up calls).
# Catch2 comes from the Debian package carried in .gpu/ (GPU.md).
#
#   bench/profile-backward-scan-on-gpu.sh OUTDIR [SECONDS] [NAME=FILTER=ELEMENTS ...]
#
# Default runs: gate-logits at (4, 2048, 2048, 16), fused w = 128 at the same shape, fused w = 256 at
# (1, 8192, 2560, 10), dx in the scan at (16, 1024, 1024, 16). Writes OUTDIR/<name>.txt (the details page: throughput,
# scheduler and warp-state statistics, occupancy), <name>.phases.txt and <name>.sass.csv.gz (per SASS instruction).
set -uo pipefail
# shellcheck source=bench/device_call.sh
source "$(dirname "$0")/device_call.sh"  # device_call_begin (out, budget, t0), left, ensure_catch2
# shellcheck disable=SC2154
device_call_begin "bench/profile-backward-scan-on-gpu.sh OUTDIR [SECONDS] [NAME=FILTER=ELEMENTS ...]" "${1:-}" \
  "${2:-540}" || exit 2
shift 2 2> /dev/null || shift $#
runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=(
  "logits_seed=(4,2048,2048,16) w=0 WidthTile 32 logits chunked=16777216"
  "fused128_seed=(4,2048,2048,16) w=128 WidthTile 32 chunked=16777216"
  "fused256_8192=(1,8192,2560,10) w=256 WidthTile 32 chunked=20971520"
  "dx_in_scan_16x1024=(16,1024,1024,16) w=64 WidthTile 64 chunked, dx in the scan=16777216"
)
ensure_catch2 || exit 2
ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2> /dev/null | head -n 1)
[ -n "$ncu_bin" ] || { echo "no ncu on this machine" >&2; exit 2; }
probe=$(find build-gpu -name backward_scan_probe -type f -perm -u+x 2> /dev/null | head -n 1)
if [ -z "$probe" ]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_PREFIX_PATH=/opt/catch2/usr -DCMAKE_BUILD_TYPE=Release \
    -DHAWK_BUILD_PROBES=ON > "$out/build.log" 2>&1 &&
    cmake --build build-gpu -j "$(nproc)" --target backward_scan_probe >> "$out/build.log" 2>&1 ||
    { grep -E "error" -A3 "$out/build.log" | head -n 40; exit 1; }
  probe=$(find build-gpu -name backward_scan_probe -type f -perm -u+x | head -n 1)
  echo "build $(( $(date +%s) - t0 )) s"
fi
status=0
for run in "${runs[@]}"; do
  name=${run%%=*}
  rest=${run#*=}
  filter=${rest%=*}
  elements=${rest##*=}
  if [ "$(left)" -lt 60 ]; then echo "$name skipped ($(left) s left)"; continue; fi
  HAWK_PROBE_FILTER="$filter" timeout "$(( $(left) - 20 ))" "$ncu_bin" --set full --import-source yes \
    -k regex:chunked_backward_scan_kernel --launch-skip 3 --launch-count 1 -f -o "/tmp/$name" "$probe" \
    > "$out/$name.log" 2>&1 || status=1
  "$ncu_bin" -i "/tmp/$name.ncu-rep" --page details > "$out/$name.txt" 2>&1 || status=1
  "$ncu_bin" -i "/tmp/$name.ncu-rep" --page source --csv --print-source sass 2> /dev/null > "/tmp/$name.sass.csv"
  gzip -c "/tmp/$name.sass.csv" > "$out/$name.sass.csv.gz"
  python3 bench/probes/sass_phases.py "/tmp/$name.sass.csv" --elements "$elements" > "$out/$name.phases.txt" 2>&1 ||
    status=1
  echo "== $name ($(( $(date +%s) - t0 )) s)"
  grep -E "Duration|Issue Slots Busy|Eligible Warps Per|Registers Per Thread|Achieved Occupancy" "$out/$name.txt"
  head -n 12 "$out/$name.phases.txt"
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt" 2>&1
exit $status
