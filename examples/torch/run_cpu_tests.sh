#!/usr/bin/env bash
# hawk_torch's tests that need no GPU (pytest -m cpu: packaging metadata and version, architectures, import
# errors, checkpoint names); ctest runs this as python:cpu. The interpreter is HAWK_PYTHON (default python3) and
# needs torch, pytest and setuptools. Without them this exits 77, which ctest reports as skipped, unless
# HAWK_REQUIRE_PYTHON_TESTS=1 (CI sets it, having installed them): then it fails.
set -uo pipefail
python=${HAWK_PYTHON:-python3}
if ! "$python" -c "import setuptools, pytest, torch" >/dev/null 2>&1; then
  echo "$python lacks torch, pytest or setuptools (pip install torch pytest setuptools, or set HAWK_PYTHON)"
  [ "${HAWK_REQUIRE_PYTHON_TESTS:-0}" = 1 ] && exit 1
  exit 77
fi
export PATH="$PATH:/usr/local/cuda/bin"  # nvcc, for the check of the default architectures
exec "$python" -m pytest -q -rs -p no:cacheprovider -m cpu "$(dirname "$0")/tests"
