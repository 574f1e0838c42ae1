#!/usr/bin/env bash
# hawk_jax's tests that need no GPU and no built library (pytest -m cpu: argument checks, parameter trees, the
# float64 references against finite differences and recurrentgemma's JAX layer, the Python layer over fake
# kernels); ctest runs this as python:jax-cpu. The interpreter is HAWK_PYTHON (default python3) and needs jax and
# pytest (flax and recurrentgemma, optional, enable the comparisons with recurrentgemma). Without jax or pytest this
# exits 77, which ctest reports as skipped, unless HAWK_REQUIRE_PYTHON_TESTS=1 (CI sets it): then it fails.
set -uo pipefail
python=${HAWK_PYTHON:-python3}
if ! "$python" -c "import jax, pytest" >/dev/null 2>&1; then
  echo "$python lacks jax or pytest (pip install jax pytest, or set HAWK_PYTHON)"
  [ "${HAWK_REQUIRE_PYTHON_TESTS:-0}" = 1 ] && exit 1
  exit 77
fi
# JAX on the CPU whatever the machine has: these tests compare against references run there.
export JAX_PLATFORMS=cpu
exec "$python" -m pytest -q -rs -p no:cacheprovider -m cpu "$(dirname "$0")/tests"
