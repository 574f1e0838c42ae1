#!/usr/bin/env bash
# Where one default RG-LRU backward call spends its time, launch by launch: every kernel and memset of the call, its
# duration and the idle gap before it, as the GPU ran them back to back (issue 17's "where the remaining time goes,
# measured, per kernel"). Runs bench/probes/profile_rglru_backward.cu (one forward, then CALLS backward calls queued
# without a synchronisation between them: the library's kernels as a caller gets them) under Nsight Systems' CUDA
# trace, and bench/summarize_backward_trace.py reads the trace: the last complete backward call, op by op, and the
# period between successive calls. Without nsys on the machine, Nsight Compute's per-kernel durations (clocks not
# locked; no memsets, no gaps) stand in. Builds the driver in build-gpu at each call (ninja: only what changed).
#
#   bench/trace-backward-kernels-on-gpu.sh OUTDIR [SECONDS] [SHAPE:MODE ...]
#       SHAPE: seed | long | batch | longest; MODE: fused | logits | fused_least (the least workspace: time slices at
#       long and longest); default: the four shapes fused, seed and long logits
#
# Writes OUTDIR/traces.tgz (each run's CSV and log) and OUTDIR/summary.txt (every run's table).
set -uo pipefail
# shellcheck source=bench/device_call.sh
source "$(dirname "$0")/device_call.sh"  # device_call_begin, left, ensure_catch2, build_gpu, nsight_tool
# shellcheck disable=SC2154
device_call_begin "bench/trace-backward-kernels-on-gpu.sh OUTDIR [SECONDS] [SHAPE:MODE ...]" "${1:-}" "${2:-540}" ||
  exit 2
shift 2 2> /dev/null || shift $#
runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=(seed:fused long:fused batch:fused longest:fused seed:logits long:logits)
ensure_catch2 || exit 2
work=$(mktemp -d)
nsys_bin=$(nsight_tool nsys)
ncu_bin=$(nsight_tool ncu)
[ -n "$nsys_bin$ncu_bin" ] || { echo "neither nsys nor ncu on this machine" >&2; exit 2; }
# Built every call (ninja rebuilds only what changed): a warm machine's build-gpu may hold another tree's driver.
build_gpu "$work/build.log" profile_rglru_backward || { grep -E "error" -A3 "$work/build.log" | head -n 40; exit 1; }
driver=$(gpu_binary profile_rglru_backward)
echo "build $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$work/gpu.txt" 2>&1
status=0
: > "$out/summary.txt"
for run in "${runs[@]}"; do
  shape=${run%%:*}
  mode=${run#*:}
  name="$shape-$mode"
  if [ "$(left)" -lt 45 ]; then echo "$name skipped ($(left) s left)" | tee -a "$out/summary.txt"; continue; fi
  # Time slices: the summary cannot split a sliced call's trace into calls (one ordered sum a slice), so it takes two
  # calls under ncu and sums each kernel's launches per call; otherwise it takes the last of three.
  calls=3 per_call=()
  [ "$mode" = fused_least ] && calls=2 per_call=(--calls 2)
  if [ "$mode" = fused_least ] && [ -z "$ncu_bin" ]; then
    status=1; echo "$name: needs ncu (a sliced call's trace is not split into calls)" >> "$out/summary.txt"
  elif [ -n "$nsys_bin" ] && [ "$mode" != fused_least ]; then
    # Six backward calls: the summary takes the last complete one and the period between the later ones.
    timeout "$(( $(left) - 15 ))" "$nsys_bin" profile -t cuda -s none --cpuctxsw none -f true -o "$work/$name" \
      "$driver" "$shape" "$mode" 6 > "$work/$name.log" 2>&1 &&
      "$nsys_bin" stats -r cuda_gpu_trace -f csv -o "$work/$name" "$work/$name.nsys-rep" >> "$work/$name.log" 2>&1 &&
      python3 bench/summarize_backward_trace.py --nsys "$work/${name}_cuda_gpu_trace.csv" --title "$name" \
        >> "$out/summary.txt" 2>&1 || { status=1; echo "$name: the trace failed ($name.log)" >> "$out/summary.txt"; }
  else
    timeout "$(( $(left) - 15 ))" "$ncu_bin" --clock-control none --metrics gpu__time_duration.sum --csv \
      --print-units base \
      "$driver" "$shape" "$mode" "$calls" > "$work/$name.ncu.csv" 2> "$work/$name.log" &&
      python3 bench/summarize_backward_trace.py --ncu "$work/$name.ncu.csv" "${per_call[@]}" --title "$name" \
        >> "$out/summary.txt" 2>&1 || { status=1; echo "$name: ncu failed ($name.log)" >> "$out/summary.txt"; }
  fi
  echo "== $name ($(( $(date +%s) - t0 )) s)"
done
cat "$work/gpu.txt" >> "$out/summary.txt"
tar -czf "$out/traces.tgz" -C "$work" --exclude='*.nsys-rep' --exclude='*.sqlite' . 2> /dev/null
cat "$out/summary.txt"
exit $status
