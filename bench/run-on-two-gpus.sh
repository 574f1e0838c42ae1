#!/usr/bin/env bash
# One device call on a two-GPU machine (nvidia-h200-x2) that does what a kernel change needs, side by side:
#   build (CMake, Release, every target) while the PyTorch extension builds;
#   GPU 0: ctest's GPU suites and examples (the CPU tests too with HAWK_CPU_CTEST=1: CI runs them), every
#          benchmark, then with HAWK_JAX=1 hawk_jax's tests (the wheels of .gpu/wheels-jax installed into python3
#          first) and bench/compare_jax.py (at most 120 s); HAWK_JAX_LANE=1 runs those on GPU 1 instead, after
#          its Python checks;
#   GPU 1: the PyTorch wheel built and installed into a fresh environment, the whole pytest suite against it
#          (examples/torch/run_wheel_check_on_gpu.sh), its host cost (bench/compare_torch.py --host-cost-only,
#          then --profile with HAWK_PROFILE=1) and bench/host_cost_breakdown.py, with HAWK_PEERS=1
#          bench/compare_peers.py in that environment (the wheels of .gpu/wheels-peers installed there first; at
#          most 240 s), with HAWK_PROFILE_FORWARD="SHAPE:KERNEL ..." Nsight Compute over those forward kernels
#          (bench/profile-forward-on-gpu.sh), then compute-sanitizer over the GPU suites until DEADLINE seconds after the
#          start (tests/run_sanitizer.py; HAWK_SANITIZE_TOOLS, HAWK_SANITIZE_SUITES as in run-on-gpu.sh, and
#          HAWK_SANITIZE_FILTER, a regular expression the test case names must match; HAWK_SANITIZE_SKIP_CLEAN,
#          earlier sanitizer logs whose clean cases are not run again; HAWK_SANITIZE_TIMEOUT, seconds per case and
#          tool, default 240); once GPU 0 is done, the
#          sanitizer's processes spread over both GPUs.
# HAWK_TORCH=0 leaves the PyTorch lane out (GPU 1 goes straight to hawk_jax or the sanitizer); HAWK_GPU0_AFTER, a
# command run on GPU 0 after the benchmarks with $OUT set to OUTDIR (e.g. a sweep filtered to new rows).
# Everything it prints goes to OUTDIR (logs, JSON); a short summary goes to stdout.
#
#   bench/run-on-two-gpus.sh OUTDIR [DEADLINE_SECONDS (default 540)]
set -uo pipefail
# shellcheck source=bench/device_call.sh
source "$(dirname "$0")/device_call.sh"  # ensure_catch2
out=${1:?usage: bench/run-on-two-gpus.sh OUTDIR [DEADLINE_SECONDS]}
deadline=${2:-540}
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
export HAWK_COMMIT=${HAWK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

ensure_catch2 || exit 2
nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee "$out/gpu.txt"

# The PyTorch wheel builds beside the CMake build (both use every core; ninja shares them fairly enough), then
# GPU 1 tests it.
if [ "${HAWK_TORCH:-1}" = 1 ]; then
  (
    export CUDA_VISIBLE_DEVICES=1 TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=$(( $(nproc) / 2 ))
    bash examples/torch/run_wheel_check_on_gpu.sh "$out/wheel" > "$out/torch-wheel.log" 2>&1
    echo $? > "$out/torch-wheel.rc"
  ) &
else
  echo "skipped (HAWK_TORCH=0)" > "$out/torch-wheel.rc"
fi

t0=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_PREFIX_PATH=/opt/catch2/usr -DCMAKE_BUILD_TYPE=Release \
  > "$out/configure.log" 2>&1 || { tail -n 40 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j "$(nproc)" -- -k 0 > "$out/build.log" 2>&1 || { grep -E "error|FAILED" -A3 "$out/build.log" | head -n 60; }
echo "build: $(( $(date +%s) - t0 )) s"

# hawk_jax: build, CPU and GPU tests, then bench/compare_jax.py (at most 120 s), on the lane HAWK_JAX_LANE names.
run_jax() {
  bash bench/install-carried-wheels.sh "${PYTHON:-python3}" .gpu/wheels-jax > "$out/jax-wheels.log" 2>&1
  local t0
  t0=$(date +%s)
  timeout $(( $(left) - 15 )) bash examples/jax/run_tests_on_gpu.sh "$out/jax" tests > "$out/jax.log" 2>&1
  echo "jax rc $? in $(( $(date +%s) - t0 )) s" >> "$out/jax.summary"
  grep -E "passed|failed|error" "$out/jax.log" | tail -n 4 >> "$out/jax.summary"
  if [ ! -s "$out/jax/compare_jax.json" ] && [ -f build-jax/libhawk_jax_ffi.so ] && [ "$(left)" -gt 40 ]; then
    t0=$(date +%s)
    HAWK_JAX_LIBRARY="$here/build-jax/libhawk_jax_ffi.so" timeout $(( $(left) > 130 ? 120 : $(left) - 10 )) "${PYTHON:-python3}" bench/compare_jax.py \
      --json "$out/compare_jax.json" > "$out/compare_jax.log" 2>&1
    echo "compare_jax rc $? in $(( $(date +%s) - t0 )) s" >> "$out/jax.summary"
  fi
}
jax_lane=none
if [ "${HAWK_JAX:-0}" = 1 ] && [ -x examples/jax/run_tests_on_gpu.sh ]; then jax_lane=${HAWK_JAX_LANE:-0}; fi

# GPU 0: the suite, then the benchmarks.
(
  export CUDA_VISIBLE_DEVICES=0
  t0=$(date +%s)
  # The GPU suites and examples first (what only this machine can run), then the CPU tests (package, Python: minutes).
  # The suites need about 215 s on an H200 (e7ca91e); the benchmarks after them about 30 s. HAWK_CTEST_RESERVE
  # (default 60) is what ctest leaves of the deadline for them; a cut run says so (rc 124) rather than pass.
  timeout $(( $(left) - ${HAWK_CTEST_RESERVE:-60} )) ctest --test-dir build-gpu --output-on-failure --timeout 300 \
    -L 'gpu|example' > "$out/ctest.log" 2>&1
  rc=$?
  echo "ctest (GPU suites, examples) rc $rc in $(( $(date +%s) - t0 )) s" > "$out/ctest.summary"
  [ "$rc" = 124 ] && echo "ctest CUT BY THE DEADLINE: the suites did not finish (raise DEADLINE)" >> "$out/ctest.summary"
  tail -n 8 "$out/ctest.log" >> "$out/ctest.summary"
  if [ "${HAWK_CPU_CTEST:-0}" = 1 ]; then  # the CPU tests (CI runs them too; minutes of this machine's time)
    timeout $(( $(left) - 150 )) ctest --test-dir build-gpu --output-on-failure --timeout 300 -LE 'gpu|example' \
      > "$out/ctest-cpu.log" 2>&1
    echo "ctest (the rest) rc $? in $(( $(date +%s) - t0 )) s" >> "$out/ctest.summary"
    tail -n 8 "$out/ctest-cpu.log" >> "$out/ctest.summary"
  fi
  t0=$(date +%s)
  timeout $(( $(left) - 10 )) bash bench/run-on-gpu.sh "$out/bench" --skip-tests --bench-filter 'bench_' \
    > "$out/bench.log" 2>&1
  echo "bench rc $? in $(( $(date +%s) - t0 )) s" >> "$out/ctest.summary"
  if [ -n "${HAWK_GPU0_AFTER:-}" ] && [ "$(left)" -gt 20 ]; then
    t0=$(date +%s)
    OUT="$out" timeout $(( $(left) - 10 )) bash -c "$HAWK_GPU0_AFTER" > "$out/gpu0-after.log" 2>&1
    echo "HAWK_GPU0_AFTER rc $? in $(( $(date +%s) - t0 )) s" >> "$out/ctest.summary"
  fi
  if [ "$jax_lane" = 0 ]; then run_jax; fi
  echo "1,0" > "$out/sanitize-gpus"  # GPU 0 is free: the sanitizer may use it too
) &
gpu0=$!

# GPU 1: pytest, then the sanitizer until the deadline.
echo "1" > "$out/sanitize-gpus"
(
  export CUDA_VISIBLE_DEVICES=1
  while [ ! -f "$out/torch-wheel.rc" ]; do sleep 2; done  # the wheel job is a sibling: wait cannot see it
  echo "wheel check rc $(cat "$out/torch-wheel.rc")" > "$out/pytest.summary"
  grep -E "wheel built|passed|failed|FAILED" "$out/torch-wheel.log" | tail -n 6 >> "$out/pytest.summary"
  if [ -s "$out/wheel/venv-python" ]; then
    t0=$(date +%s)
    HAWK_TORCH_TEST_INSTALLED=1 timeout $(( $(left) - 250 )) "$(cat "$out/wheel/venv-python")" bench/compare_torch.py \
      --host-cost-only --json "$out/host_cost.json" --png "$out/host_cost.png" > "$out/host_cost.log" 2>&1
    echo "host cost rc $? in $(( $(date +%s) - t0 )) s" >> "$out/pytest.summary"
    HAWK_TORCH_TEST_INSTALLED=1 timeout 90 "$(cat "$out/wheel/venv-python")" bench/host_cost_breakdown.py \
      --json "$out/host_cost_breakdown.json" > "$out/host_cost_breakdown.log" 2>&1
    echo "host cost breakdown rc $?" >> "$out/pytest.summary"
    if [ "${HAWK_PROFILE:-0}" = 1 ]; then  # torch.profiler's top CPU operations per call
      HAWK_TORCH_TEST_INSTALLED=1 timeout $(( $(left) - 230 )) "$(cat "$out/wheel/venv-python")" bench/compare_torch.py \
        --host-cost-only --profile > "$out/host_profile.log" 2>&1
      echo "profile rc $?" >> "$out/pytest.summary"
    fi
    if [ "${HAWK_PEERS:-0}" = 1 ]; then  # hawk against FLA, accelerated-scan and recurrentgemma's torch layer
      bash bench/install-carried-wheels.sh "$(cat "$out/wheel/venv-python")" .gpu/wheels-peers \
        > "$out/compare_peers.log" 2>&1
      limit=$(( $(left) - 60 )); [ "$limit" -gt 240 ] && limit=240
      if [ "$limit" -ge 60 ]; then
        t0=$(date +%s)
        HAWK_TORCH_TEST_INSTALLED=1 timeout "$limit" "$(cat "$out/wheel/venv-python")" bench/compare_peers.py \
          --json "$out/compare_peers.json" --deadline $(( limit - 20 )) >> "$out/compare_peers.log" 2>&1
        echo "compare_peers rc $? in $(( $(date +%s) - t0 )) s" >> "$out/pytest.summary"
      else
        echo "compare_peers skipped: $(left) s left before the deadline" >> "$out/pytest.summary"
      fi
    fi
  fi
  if [ "${HAWK_PROFILE_FORWARD:-}" != "" ]; then  # Nsight Compute over the named forward kernels (SHAPE:KERNEL ...)
    timeout $(( $(left) > 200 ? 150 : 30 )) bash bench/profile-forward-on-gpu.sh "$out/profile" $HAWK_PROFILE_FORWARD \
      > "$out/profile.log" 2>&1
    echo "forward profile rc $?" >> "$out/pytest.summary"
  fi
  if [ "$jax_lane" = 1 ]; then run_jax; fi
  exes=$(ls build-gpu/tests/gpu/*/hawk_gpu_* build-gpu/tests/hawk_gpu_* 2>/dev/null)
  if [ -n "${HAWK_SANITIZE_SUITES:-}" ]; then
    chosen=""; for exe in $exes; do for suite in $HAWK_SANITIZE_SUITES; do
      [ "$(basename "$exe")" = "$suite" ] && chosen="$chosen $exe"; done; done; exes=$chosen
  fi
  tools=(); for tool in ${HAWK_SANITIZE_TOOLS:-memcheck initcheck synccheck racecheck}; do tools+=(--tool "$tool"); done
  filter=(); [ -n "${HAWK_SANITIZE_FILTER:-}" ] && filter=(--filter "$HAWK_SANITIZE_FILTER")
  skip=(); for log in ${HAWK_SANITIZE_SKIP_CLEAN:-}; do skip+=(--skip-clean "$log"); done
  timeout $(( $(left) - 5 )) python3 tests/run_sanitizer.py "${tools[@]}" "${filter[@]}" "${skip[@]}" \
    --jobs "${HAWK_SANITIZE_JOBS:-8}" --gpus-file "$out/sanitize-gpus" --timeout "${HAWK_SANITIZE_TIMEOUT:-240}" \
    --logs "$out/sanitize" $exes > "$out/sanitize.log" 2>&1
  echo "sanitizer rc $?" > "$out/sanitize.summary"
  grep -c "^clean" "$out/sanitize.log" >> "$out/sanitize.summary"
  grep -E "^FAILED|^sanitizer:" "$out/sanitize.log" | head -n 30 >> "$out/sanitize.summary"
) &
gpu1=$!

wait $gpu0 $gpu1
cat "$out/ctest.summary" "$out/jax.summary" "$out/pytest.summary" "$out/sanitize.summary" 2>/dev/null
grep -E "FAILED|passed|failed" "$out/bench.log" 2>/dev/null | head -n 20
echo "total: $(( $(date +%s) - start )) s"
