#!/usr/bin/env bash
# Nsight Compute over one launch of the RG-LRU backward's scan kernel (chunked or sequential, whichever the default
# dispatch runs) at chosen shapes and modes, through bench/probes/profile_rglru_backward.cu (the library's kernels
# as a caller gets them: the scan probe's carry a timeline hook that costs them registers), with where the kernel's
# instructions and stall samples go phase by phase (bench/probes/sass_phases.py): the measurement that decides what
# to cut next in a scan kernel (issue 17). Builds the driver in build-gpu at every call (incrementally: a warm
# machine keeps its build). Catch2 comes from the Debian package carried in .gpu/ (GPU.md), for the configure step.
#
#   bench/profile-backward-scan-on-gpu.sh OUTDIR [SECONDS] [SHAPE:MODE ...]
#       SHAPE: seed | long | batch | longest; MODE: fused | logits (default: seed:logits seed:fused long:fused
#       batch:fused); HAWK_PROFILE_KERNEL: the kernels' regex (default backward_scan_kernel, which names both scans)
#
# Writes OUTDIR/<shape>-<mode>.txt (the details page: throughput, scheduler and warp-state statistics, occupancy,
# registers), <shape>-<mode>.phases.txt and <shape>-<mode>.sass.csv.gz (per SASS instruction: executions, samples).
set -uo pipefail
# shellcheck source=bench/device_call.sh
source "$(dirname "$0")/device_call.sh"  # device_call_begin, left, ensure_catch2, build_gpu, nsight_tool
# shellcheck disable=SC2154
device_call_begin "bench/profile-backward-scan-on-gpu.sh OUTDIR [SECONDS] [SHAPE:MODE ...]" "${1:-}" "${2:-540}" ||
  exit 2
shift 2 2> /dev/null || shift $#
runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=(seed:logits seed:fused long:fused batch:fused)
kernels=${HAWK_PROFILE_KERNEL:-backward_scan_kernel}
ensure_catch2 || exit 2
ncu_bin=$(nsight_tool ncu)
[ -n "$ncu_bin" ] || { echo "no ncu on this machine" >&2; exit 2; }
# Built every call (ninja rebuilds only what changed): a warm machine's build-gpu may hold another tree's driver.
build_gpu "$out/build.log" profile_rglru_backward || { grep -E "error" -A3 "$out/build.log" | head -n 40; exit 1; }
driver=$(gpu_binary profile_rglru_backward)
echo "build $(( $(date +%s) - t0 )) s"
status=0
for run in "${runs[@]}"; do
  shape=${run%%:*}
  mode=${run#*:}
  name="$shape-$mode"
  if [ "$(left)" -lt 60 ]; then echo "$name skipped ($(left) s left)"; continue; fi
  # The second backward call's launch of the kernel: the first runs on cold caches and sets the attributes.
  timeout "$(( $(left) - 20 ))" "$ncu_bin" --set full --import-source yes -k "regex:$kernels" --launch-skip 1 \
    --launch-count 1 -f -o "/tmp/$name" "$driver" "$shape" "$mode" 3 > "$out/$name.log" 2>&1 || status=1
  "$ncu_bin" -i "/tmp/$name.ncu-rep" --page details > "$out/$name.txt" 2>&1 || status=1
  "$ncu_bin" -i "/tmp/$name.ncu-rep" --page source --csv --print-source sass 2> /dev/null > "/tmp/$name.sass.csv"
  gzip -c "/tmp/$name.sass.csv" > "$out/$name.sass.csv.gz"
  # The driver's last line names the elements a launch covers (T * W), for the per-element counts.
  elements=$(sed -n 's/.* \([0-9]*\) elements$/\1/p' "$out/$name.log" | tail -n 1)
  python3 bench/probes/sass_phases.py "/tmp/$name.sass.csv" --elements "${elements:-0}" \
    > "$out/$name.phases.txt" 2>&1 || status=1
  echo "== $name ($(( $(date +%s) - t0 )) s)"
  grep -E "^  [a-z_]+.*kernel<|Duration|Issue Slots Busy|Eligible Warps Per|Registers Per Thread|Achieved Occupancy" \
    "$out/$name.txt" | cut -c1-160
  head -n 12 "$out/$name.phases.txt"
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt" 2>&1
exit $status
