#!/usr/bin/env bash
# Build on the GPU machine, run the whole GPU suite (optionally under compute-sanitizer) and every benchmark,
# and leave logs and JSON under OUTDIR. Catch2 comes from the Debian package carried in .gpu/ (GPU.md).
#
#   bench/run-on-gpu.sh OUTDIR [--skip-tests] [--skip-bench] [--sanitize] [--sweep] [--bench-filter REGEX]
#
# --sweep also runs the configuration sweeps (build-gpu/bench/*/sweep_*): candidates against the shipped ones.
#
# --sanitize runs every GPU test case under compute-sanitizer's memcheck, racecheck, initcheck and synccheck
# (HAWK_SANITIZE_TOOLS="memcheck initcheck" picks fewer), HAWK_SANITIZE_JOBS at a time (default 12), over the
# GPUs in HAWK_SANITIZE_GPUS (e.g. "0,1"; default: the visible ones as CUDA sees them);
# HAWK_SANITIZE_SKIP_CLEAN="log ..." skips what earlier tests/run_sanitizer.py logs report clean;
# HAWK_SANITIZE_SUITES="hawk_gpu_rglru ..." limits the suites (default: all), HAWK_SANITIZE_EXAMPLES=0 skips the
# examples.
set -uo pipefail
# shellcheck source=bench/device_call.sh
source "$(dirname "$0")/device_call.sh"  # ensure_catch2
out=${1:?usage: bench/run-on-gpu.sh OUTDIR [--skip-tests] [--skip-bench] [--sanitize]}
shift
run_tests=1 run_bench=1 sanitize=0 bench_filter=. sweep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --skip-tests) run_tests=0 ;;
    --skip-bench) run_bench=0 ;;
    --sanitize) sanitize=1 ;;
    --sweep) sweep=1 ;;
    --bench-filter) bench_filter=$2; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

ensure_catch2 || exit 2
export HAWK_COMMIT=${HAWK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"

status=0
t0=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_PREFIX_PATH=/opt/catch2/usr -DCMAKE_BUILD_TYPE=Release -DHAWK_BUILD_PROBES=ON \
  > "$out/configure.log" 2>&1 || { tail -n 40 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j "$(nproc)" -- -k 0 > "$out/build.log" 2>&1 || { status=1; grep -E "error|FAILED" -A3 "$out/build.log" | head -n 60; }
echo "build: $(( $(date +%s) - t0 )) s"

if [ $run_tests = 1 ]; then
  ctest --test-dir build-gpu --output-on-failure --timeout 300 > "$out/ctest.log" 2>&1 || status=1
  tail -n 25 "$out/ctest.log"
fi

if [ $sanitize = 1 ]; then
  # memcheck and racecheck over every GPU suite (one test case per process) and every example (whole), in
  # tests/run_sanitizer.py.
  t0=$(date +%s)
  exes=$(ls build-gpu/tests/hawk_gpu_* build-gpu/tests/gpu/*/hawk_gpu_* 2>/dev/null)
  if [ -n "${HAWK_SANITIZE_SUITES:-}" ]; then
    chosen=""; for exe in $exes; do for suite in $HAWK_SANITIZE_SUITES; do
      [ "$(basename "$exe")" = "$suite" ] && chosen="$chosen $exe"; done; done; exes=$chosen
  fi
  # context_parallel runs as 2 ranks emulated on one GPU (its NCCL mode needs one GPU per rank).
  programs=(); [ "${HAWK_SANITIZE_EXAMPLES:-1}" = 0 ] ||
  for example in build-gpu/examples/[0-9]* build-gpu/examples/context_parallel/context_parallel; do
    [ -x "$example" ] && [ -f "$example" ] || continue
    if [ "$(basename "$example")" = context_parallel ]; then programs+=(--program "$example --emulate 2")
    else programs+=(--program "$example"); fi
  done
  # HAWK_SANITIZE_SKIP_CLEAN="log ...": skip what earlier logs of the same kernels report clean.
  skip=(); for log in ${HAWK_SANITIZE_SKIP_CLEAN:-}; do skip+=(--skip-clean "$log"); done
  tools=(); for tool in ${HAWK_SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}; do tools+=(--tool "$tool"); done
  gpus=(); [ -n "${HAWK_SANITIZE_GPUS:-}" ] && gpus=(--gpus "$HAWK_SANITIZE_GPUS")
  python3 tests/run_sanitizer.py "${tools[@]}" "${gpus[@]}" --jobs "${HAWK_SANITIZE_JOBS:-12}" "${skip[@]}" \
    "${programs[@]}" --logs "$out/sanitize" $exes > "$out/sanitize.log" 2>&1 || status=1
  grep -E "^FAILED|^sanitizer:" "$out/sanitize.log" | head -n 40
  echo "sanitize: $(( $(date +%s) - t0 )) s"
fi

if [ $run_bench = 1 ]; then
  for exe in build-gpu/bench/*/bench_*; do
    [ -x "$exe" ] || continue
    name=$(basename "$exe")
    echo "$name" | grep -Eq "$bench_filter" || continue
    timeout 240 "$exe" "$out/$name.json" > "$out/$name.log" 2>&1 || { echo "$name FAILED"; status=1; }
    tail -n 20 "$out/$name.log"
  done
fi
# Context parallelism's strong scaling (1, 2, 4, 8 GPUs, as many as the machine has; NCCL, multicast off).
cp_example=build-gpu/examples/context_parallel/context_parallel
if [ $run_bench = 1 ] && echo context_parallel | grep -Eq "$bench_filter" && [ -f $cp_example ] && [ -x $cp_example ]; then
  NCCL_NVLS_ENABLE=0 timeout 300 $cp_example --bench "$out/context_parallel.json" \
    > "$out/context_parallel.log" 2>&1; code=$?
  [ $code = 0 ] || [ $code = 77 ] || { echo "context_parallel --bench FAILED"; status=1; }
  cat "$out/context_parallel.log"
fi
if [ $sweep = 1 ]; then
  for exe in build-gpu/bench/*/sweep_*; do
    [ -x "$exe" ] || continue
    name=$(basename "$exe")
    timeout 300 "$exe" "$out/$name.json" > /dev/null 2> "$out/$name.log" || { echo "$name FAILED"; status=1; }
    cat "$out/$name.log"
  done
fi
exit $status
