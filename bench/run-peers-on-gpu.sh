#!/usr/bin/env bash
# hawk through its PyTorch binding against the public peers, in one device call on one GPU (about 8 minutes on an
# H200): build hawk_torch's wheel and run its pytest suite against the installed package
# (examples/torch/run_wheel_check_on_gpu.sh), install the peers' wheels carried in .gpu/wheels-peers into that
# environment (bench/install-carried-wheels.sh says which ones), then bench/compare_peers.py until a deadline.
#
#   bench/run-peers-on-gpu.sh OUTDIR [SECONDS]      # SECONDS: the whole call's budget (default 540)
#
# accelerated-scan's warp rows compile a CUDA extension at their first import (about 2 minutes) and are left out;
# PEER_IMPLS overrides the rows, PEER_SHAPES the shapes (B,L,W,H ...; default: the long sequences first, so a
# deadline cuts the short shapes). Writes OUTDIR/wheel/ (the wheel check's logs), OUTDIR/compare_peers.json and
# .log, OUTDIR/summary.txt (more than the device tool's eight returned files: write OUTDIR outside $OUT and
# archive it there). Exit status: the wheel check's, or compare_peers's if that failed.
set -uo pipefail
# shellcheck source=bench/device_call.sh
source "$(dirname "$0")/device_call.sh"
device_call_begin "bench/run-peers-on-gpu.sh OUTDIR [SECONDS]" "$@" || exit 2

mkdir -p "$out/wheel"
bash examples/torch/run_wheel_check_on_gpu.sh "$out/wheel" > "$out/wheel/check.log" 2>&1
check=$?
echo "wheel check rc $check in $(( $(date +%s) - t0 )) s" | tee "$out/summary.txt"
grep -E "wheel built|passed|failed" "$out/wheel/check.log" | tail -n 4 | tee -a "$out/summary.txt"
[ -s "$out/wheel/venv-python" ] || exit 1
python=$(cat "$out/wheel/venv-python")

bash bench/install-carried-wheels.sh "$python" .gpu/wheels-peers > "$out/compare_peers.log" 2>&1
impls=${PEER_IMPLS:-hawk hawk_gate_logits fla_chunk fla_fused_recurrent accelerated_scan_triton recurrentgemma}
shapes=${PEER_SHAPES:-1,65536,2560,10 1,8192,2560,10 4,2048,2048,16 16,1024,1024,16}
limit=$(( $(left) - 15 ))
status=$check
if [ "$limit" -ge 60 ]; then
  t1=$(date +%s)
  # shellcheck disable=SC2086  # the lists are word lists
  HAWK_TORCH_TEST_INSTALLED=1 timeout "$limit" "$python" bench/compare_peers.py --json "$out/compare_peers.json" \
    --impls $impls --shapes $shapes --deadline $(( limit - 40 )) >> "$out/compare_peers.log" 2>&1 || status=1
  echo "compare_peers rc $status in $(( $(date +%s) - t1 )) s" | tee -a "$out/summary.txt"
  # the markdown table compare_peers prints last (from its last header line on)
  awk '/^\| B, L, W, H/ { table = ""; found = 1 } found { table = table $0 "\n" } END { printf "%s", table }' \
    "$out/compare_peers.log" | tee -a "$out/summary.txt"
else
  echo "compare_peers skipped: $(left) s left" | tee -a "$out/summary.txt"
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$out/summary.txt" 2>&1
exit $status
