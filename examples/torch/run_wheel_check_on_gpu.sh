#!/usr/bin/env bash
# On the GPU machine, offline: build hawk_torch's wheel from a clean copy of the tree, install it into a fresh
# virtual environment that sees the system's torch, and run the whole pytest suite against the installed package
# from outside the source tree (HAWK_TORCH_TEST_INSTALLED=1: the tests then fail unless hawk_torch is imported from
# that environment's site-packages with its ahead-of-time library). Logs go to OUTDIR.
#
#   examples/torch/run_wheel_check_on_gpu.sh OUTDIR
#
# The wheel is built for TORCH_CUDA_ARCH_LIST, 9.0 (the H200) unless set, so that the build is one architecture
# (about as long as the JIT build); MAX_JOBS defaults to nproc. PYTHON picks the interpreter (default python3); it
# needs torch, pip, setuptools (with wheel if setuptools < 70.1), ninja, nvcc and pytest.
set -uo pipefail
out=${1:?usage: examples/torch/run_wheel_check_on_gpu.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-python3}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
work=$(mktemp -d "${TMPDIR:-/tmp}/hawk-wheel-check.XXXXXX")
echo "work folder $work, TORCH_CUDA_ARCH_LIST=$TORCH_CUDA_ARCH_LIST, MAX_JOBS=$MAX_JOBS, python $(command -v "$python")"
fail() { echo "FAILED: $*"; exit 1; }
"$python" -c "import setuptools, pip, pytest, torch" 2>/dev/null || fail "$python lacks torch, pip, setuptools or pytest"

# 1. A clean copy of what the package is built from. With git: the files git tracks or would track (as they are
#    in the working tree, so uncommitted work is checked too); without (the device's copy has no .git): the same
#    folders without build outputs.
parts=(CMakeLists.txt LICENSE include examples/torch)
mkdir -p "$work/src"
if git -C "$here" rev-parse --git-dir >/dev/null 2>&1; then
  (cd "$here" && git ls-files -z --cached --others --exclude-standard -- "${parts[@]}" |
     tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$work/src"  # (deleted files: ignored)
else
  (cd "$here" && tar --exclude=__pycache__ --exclude='*.so' --exclude=_build_info.py --exclude='*.egg-info' \
     --exclude=examples/torch/build -cf - "${parts[@]}") | tar -xf - -C "$work/src"
fi
[ -f "$work/src/examples/torch/setup.py" ] || fail "the copy in $work/src has no examples/torch/setup.py"

# 2. The wheel, built against the system torch.
t0=$(date +%s)
(cd "$work/src" && "$python" -m pip wheel --no-build-isolation --no-deps -v -w "$work/wheel" ./examples/torch) \
  > "$out/wheel-build.log" 2>&1 || { grep -E "error|Error" -A3 "$out/wheel-build.log" | head -n 60;
                                    tail -n 30 "$out/wheel-build.log"; fail "pip wheel (log: $out/wheel-build.log)"; }
echo "wheel built in $(( $(date +%s) - t0 )) s: $(cd "$work/wheel" && ls)"
wheel=$(ls "$work"/wheel/hawk_torch-*.whl)
"$python" -m zipfile -l "$wheel" > "$out/wheel-contents.txt"
for member in "hawk_torch/hawk_torch_ops\..*\.so" "hawk_torch/_build_info\.py" "hawk_torch/include/hawk/hawk\.cuh" \
              "hawk_torch/LICENSE"; do
  grep -Eq "^$member " "$out/wheel-contents.txt" || fail "the wheel lacks $member ($out/wheel-contents.txt)"
done

# 3. A fresh environment that sees the system torch. A venv made from inside another venv only sees the base
#    interpreter's packages, so the outer environment's site-packages are added with a .pth file.
"$python" -m venv --system-site-packages "$work/venv" > "$out/install.log" 2>&1 || fail "python -m venv (log: $out/install.log)"
"$python" - "$work/venv" >> "$out/install.log" 2>&1 <<'EOF' || fail "linking the outer environment (log: $out/install.log)"
import pathlib, site, subprocess, sys
venv = pathlib.Path(sys.argv[1])
if sys.prefix != sys.base_prefix:
    inner = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                           check=True, capture_output=True, text=True).stdout.strip()
    pathlib.Path(inner, "outer-environment.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    print("added", site.getsitepackages(), "to", inner)
EOF
vpython="$work/venv/bin/python"
echo "$vpython" > "$out/venv-python"  # for what runs after this script against the installed wheel
"$vpython" -m pip install --no-deps --no-build-isolation --no-index "$wheel" >> "$out/install.log" 2>&1 ||
  fail "pip install of the wheel (log: $out/install.log)"

# 4. The whole suite against the installed package, run from outside the source tree.
cd "$work"
export HAWK_TORCH_TEST_INSTALLED=1
"$vpython" -c "import hawk_torch; print(hawk_torch.__file__, hawk_torch.__version__, hawk_torch.build_info())" \
  > "$out/import.log" 2>&1 || { cat "$out/import.log"; fail "import hawk_torch"; }
cat "$out/import.log"
t0=$(date +%s)
status=0
"$vpython" -m pytest -q -rs -p no:cacheprovider "$work/src/examples/torch/tests" > "$out/pytest.log" 2>&1 || status=1
tail -n 30 "$out/pytest.log"
echo "pytest against the installed wheel: $(( $(date +%s) - t0 )) s, $([ $status = 0 ] && echo passed || echo FAILED)"
exit $status
