#!/usr/bin/env bash
# On the GPU machine: build hawk_jax's FFI library (build-jax/), run the whole pytest suite against it (the CPU
# tests, then the GPU tests), then bench/compare_jax.py. Logs and the JSON go to OUTDIR.
#
#   examples/jax/run_tests_on_gpu.sh OUTDIR [all|tests|bench]      (default: all)
#
# PYTHON (default python3) must have jax with its CUDA plugin, pytest, and for the comparisons flax and
# recurrentgemma (examples/jax/README.md lists the wheels to carry to a machine without network).
set -uo pipefail
out=${1:?usage: examples/jax/run_tests_on_gpu.sh OUTDIR [all|tests|bench]}
what=${2:-all}
case "$what" in
  all|tests|bench) ;;
  *) echo "the second argument is all, tests or bench, not $what" >&2; exit 2 ;;
esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
python=${PYTHON:-python3}
export HAWK_JAX_LIBRARY="$here/build-jax/libhawk_jax_ffi.so"
export HAWK_COMMIT=${HAWK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
status=0

t0=$(date +%s)
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if ! { cmake -S examples/jax -B build-jax "${generator[@]}" -DPython_EXECUTABLE="$(command -v "$python")" &&
       cmake --build build-jax --parallel; } >"$out/build.log" 2>&1; then
  echo "build failed: $out/build.log"; tail -30 "$out/build.log"; exit 1
fi
echo "build: $(( $(date +%s) - t0 )) s"

if [ "$what" != bench ]; then
  t0=$(date +%s)
  # Two processes: the CPU tests swap the kernel calls for fakes, and nothing JAX traced or cached with them may
  # reach the GPU tests. -p no:cacheprovider: the checkout may be read-only.
  for marker in cpu gpu; do
    "$python" -m pytest -q -rs -p no:cacheprovider -m $marker examples/jax/tests >"$out/pytest-$marker.log" 2>&1 ||
      status=1
    tail -15 "$out/pytest-$marker.log"
  done
  echo "pytest: $(( $(date +%s) - t0 )) s"
fi

if [ "$what" != tests ]; then
  t0=$(date +%s)
  "$python" bench/compare_jax.py --json "$out/compare_jax.json" >"$out/bench.log" 2>&1 || status=1
  tail -25 "$out/bench.log"
  echo "bench: $(( $(date +%s) - t0 )) s"
fi
exit $status
