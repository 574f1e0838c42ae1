#!/usr/bin/env bash
# Issue 20's runs, in one device call on a machine of 4 or 8 GPUs (nvidia-h200-x4 / -x8): context parallelism's
# strong scaling, forward+backward at B = 1, W = 2560, H = 10, bf16 fused, L = 131072 and 524288, both modes,
# through NCCL with NVLink multicast off:
#   1. the C++ example (examples/context_parallel: --bench JSON --length L): 1, 2, 4, 8 GPUs as the machine has,
#      each run checked against one GPU (bitwise for exact; relative errors and early exits for fast);
#   2. beside its build, hawk_torch's wheel built, installed into a fresh environment and its whole pytest suite run
#      (examples/torch/run_wheel_check_on_gpu.sh: the torchrun check at 2, 4 and 8 ranks, each where the machine
#      has that many GPUs);
#   3. the same strong scaling through hawk_torch.context_parallel under torchrun, one process per GPU
#      (examples/torch/context_parallel_check.py --bench JSON --length L).
# Everything goes to OUTDIR (logs, JSON); a short summary to stdout. Each step has a time limit within DEADLINE
# seconds of the start (default 570: one device call), so a hung NCCL run cannot take the call. The device's copy
# has no .git: pass HAWK_COMMIT for the JSON records.
#
#   HAWK_COMMIT=abc1234 bench/run-context-parallel-scaling.sh OUTDIR [DEADLINE_SECONDS]
set -uo pipefail
out=${1:?usage: bench/run-context-parallel-scaling.sh OUTDIR [DEADLINE_SECONDS]}
deadline=${2:-570}
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
export HAWK_COMMIT=${HAWK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee "$out/gpu.txt"
lengths=${HAWK_CP_LENGTHS:-"131072 524288"}

# The wheel and its pytest suite build and run beside the example's build.
(
  export TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=$(( $(nproc) / 2 ))
  timeout $(( $(left) - 200 )) bash examples/torch/run_wheel_check_on_gpu.sh "$out/wheel" > "$out/torch-wheel.log" 2>&1
  echo $? > "$out/torch-wheel.rc"
) &
wheel_lane=$!

t0=$(date +%s)
stop_wheel_lane() { pkill -TERM -P "$wheel_lane" 2>/dev/null; kill "$wheel_lane" 2>/dev/null; }  # timeout passes it on
cmake -S . -B build-cp -G Ninja -DCMAKE_BUILD_TYPE=Release -DHAWK_BUILD_TESTS=OFF -DHAWK_BUILD_BENCHMARKS=OFF \
  > "$out/configure.log" 2>&1 || { tail -n 40 "$out/configure.log"; stop_wheel_lane; exit 1; }
cmake --build build-cp -j "$(( $(nproc) / 2 ))" --target context_parallel > "$out/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A3 "$out/build.log" | head -n 40; stop_wheel_lane; exit 1; }
echo "example built in $(( $(date +%s) - t0 )) s"
wait "$wheel_lane"
echo "hawk_torch wheel and pytest: rc $(cat "$out/torch-wheel.rc")"; tail -n 3 "$out/wheel/pytest.log" 2>/dev/null
# (pytest -q -rs names the torchrun checks only when they fail or skip)
grep -E "test_both_modes_over_nccl|ranks needs" "$out/wheel/pytest.log" 2>/dev/null | head -n 6

for L in $lengths; do
  timeout $(( $(left) > 130 ? 120 : $(left) - 10 )) \
    build-cp/examples/context_parallel/context_parallel --bench "$out/context_parallel_L$L.json" --length "$L" \
    > "$out/context_parallel_L$L.txt" 2>&1
  echo "C++ example, L = $L: rc $?"; grep -E "GPU|matches|MISMATCH" "$out/context_parallel_L$L.txt"
done

vpython=$(cat "$out/wheel/venv-python" 2>/dev/null)
if [ -n "$vpython" ] && (cd /tmp && HAWK_TORCH_TEST_INSTALLED=1 "$vpython" -c "import hawk_torch") > /dev/null 2>&1; then
  for L in $lengths; do
    (cd /tmp && HAWK_TORCH_TEST_INSTALLED=1 timeout $(( $(left) - 5 )) "$vpython" -m torch.distributed.run --standalone --nproc-per-node "$gpus" \
       "$here/examples/torch/context_parallel_check.py" --bench "$out/torch_context_parallel_L$L.json" --length "$L") \
      > "$out/torch_context_parallel_L$L.txt" 2>&1
    echo "hawk_torch under torchrun, $gpus ranks, L = $L: rc $?"
    grep -E "torch bench|differs|FAIL" "$out/torch_context_parallel_L$L.txt" | head -n 8
  done
else
  echo "no installed hawk_torch (the wheel lane failed): the torchrun scaling was not run"
fi
