#!/usr/bin/env bash
# On the GPU machine: build the hawk_torch operator library, run its pytest suite, then bench/compare_torch.py.
# Logs, the JSON and the PNG go to OUTDIR.
#
#   examples/torch/run_tests_on_gpu.sh OUTDIR [--skip-tests] [--skip-bench] [--quick-bench]
set -uo pipefail
out=${1:?usage: examples/torch/run_tests_on_gpu.sh OUTDIR [--skip-tests] [--skip-bench] [--quick-bench]}
shift
run_tests=1 run_bench=1 bench_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --skip-tests) run_tests=0 ;;
    --skip-bench) run_bench=0 ;;
    --quick-bench) bench_args+=(--quick) ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
export PYTHONPATH="$here/examples/torch${PYTHONPATH:+:$PYTHONPATH}"
export HAWK_TORCH_BUILD_DIR=${HAWK_TORCH_BUILD_DIR:-$here/build-torch}
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
export HAWK_COMMIT=${HAWK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
python=${PYTHON:-python3}
status=0

t0=$(date +%s)
HAWK_TORCH_VERBOSE=1 "$python" -c "import hawk_torch; print('hawk_torch loaded, time chunk', hawk_torch.TIME_CHUNK)" \
  > "$out/torch-build.log" 2>&1 || { grep -E "error|Error" -A3 "$out/torch-build.log" | head -n 60; tail -n 20 "$out/torch-build.log"; exit 1; }
echo "hawk_torch build: $(( $(date +%s) - t0 )) s"

if [ $run_tests = 1 ]; then
  t0=$(date +%s)
  "$python" -m pytest -q -p no:cacheprovider examples/torch/tests > "$out/torch-pytest.log" 2>&1 || status=1
  tail -n 30 "$out/torch-pytest.log"
  echo "hawk_torch tests: $(( $(date +%s) - t0 )) s"
fi

if [ $run_bench = 1 ]; then
  stamp=$(date +%Y-%m-%d)
  "$python" bench/compare_torch.py --json "$out/compare_torch-$stamp.json" --png "$out/compare_torch-$stamp.png" \
    "${bench_args[@]}" > "$out/compare_torch.log" 2>&1 || { echo "compare_torch FAILED"; status=1; }
  tail -n 40 "$out/compare_torch.log"
fi
exit $status
