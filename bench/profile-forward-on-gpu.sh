#!/usr/bin/env bash
# Nsight Compute over one launch of each RG-LRU forward kernel (bench/rglru/profile_rglru_forward.cu) at the
# shapes named on the command line, after a build in build-gpu (bench/run-on-two-gpus.sh makes one). Writes
# OUTDIR/<shape>-<kernel>.ncu-rep, its details page as text (throughput, occupancy, scheduler statistics) and its
# source page per SASS instruction (executions, stall samples) as gzipped CSV.
#
#   bench/profile-forward-on-gpu.sh OUTDIR [SHAPE:KERNEL ...]   (default: seed and long, sequential and chunked)
set -uo pipefail
out=${1:?usage: bench/profile-forward-on-gpu.sh OUTDIR [SHAPE:KERNEL ...]}
shift
mkdir -p "$out"
driver=build-gpu/bench/rglru/profile_rglru_forward
[ -x "$driver" ] || { echo "no $driver: build first" >&2; exit 2; }
# shellcheck source=bench/device_call.sh
source "$(dirname "$0")/device_call.sh"  # nsight_tool
ncu_bin=$(nsight_tool ncu)
[ -n "$ncu_bin" ] || { echo "no ncu on this machine" >&2; exit 2; }
runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=(seed:sequential seed:chunked long:sequential long:chunked)
for run in "${runs[@]}"; do
  shape=${run%%:*}
  kernel=${run#*:}
  # Skip the first launch (cold caches, first-call attribute setting); profile the second.
  "$ncu_bin" --clock-control none --set full -k regex:forward_kernel --launch-skip 1 --launch-count 1 \
    -f -o "$out/$shape-$kernel" "$driver" "$shape" "$kernel" 3 > "$out/$shape-$kernel.log" 2>&1
  echo "$shape $kernel: rc $?"
  "$ncu_bin" -i "$out/$shape-$kernel.ncu-rep" --page details > "$out/$shape-$kernel.txt" 2>&1
  # Per SASS instruction: executions and stall samples (where the issue slots and the waits go).
  "$ncu_bin" -i "$out/$shape-$kernel.ncu-rep" --page source --csv --print-source sass 2> /dev/null |
    gzip > "$out/$shape-$kernel.sass.csv.gz"
done
