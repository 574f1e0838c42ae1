#!/usr/bin/env bash
# On the GPU machine (no network): install the wheels carried in folders of the checkout into one interpreter's
# environment, offline, without dependency resolution (pip install --no-index --no-deps), and print what it did.
#
#   bench/install-carried-wheels.sh PYTHON DIR [DIR ...]
#   e.g. bench/install-carried-wheels.sh "$(cat OUT/wheel/venv-python)" .gpu/wheels-peers
#        bench/install-carried-wheels.sh python3 .gpu/wheels-jax
#
# The folders are filled on a machine with network (the wheels for Python 3.12, manylinux x86-64):
#   .gpu/wheels-peers: fla-core, accelerated-scan, recurrentgemma and typeguard, plus the small pure-Python
#                      packages `import recurrentgemma.torch` needs (einops, jaxtyping, wadler_lindig, sentencepiece)
#   .gpu/wheels-jax:   examples/jax/gpu-test-wheels.txt
# A wheel whose distribution is already installed (any version; the image's own is usually newer and matched to its
# torch / jax) is kept as it is, unless HAWK_WHEELS_REPLACE=1. A missing or empty folder is reported, not an error.
# Exit status: 0 unless pip failed.
set -uo pipefail
python=${1:?usage: bench/install-carried-wheels.sh PYTHON DIR [DIR ...]}
shift
command -v "$python" >/dev/null 2>&1 || { echo "install-carried-wheels: no interpreter $python" >&2; exit 2; }
status=0
for dir in "$@"; do
  if [ ! -d "$dir" ]; then
    echo "install-carried-wheels: no folder $dir: nothing installed from it"
    continue
  fi
  # Which of the folder's wheels to install: one line per wheel, "install PATH" or "keep NAME VERSION (carried V)".
  plan=$("$python" - "$dir" "${HAWK_WHEELS_REPLACE:-0}" <<'EOF'
import pathlib, re, sys
from importlib import metadata
folder, replace = pathlib.Path(sys.argv[1]), sys.argv[2] == "1"
for wheel in sorted(folder.glob("*.whl")):
    name, version = wheel.name.split("-")[:2]
    try:
        have = metadata.version(re.sub(r"[-_.]+", "-", name).lower())
    except metadata.PackageNotFoundError:
        have = None
    if have is None or (replace and have != version):
        print("install", wheel)
    else:
        print("keep", name, have, f"(carried {version})")
EOF
  ) || { echo "install-carried-wheels: $python could not read $dir"; status=1; continue; }
  wheels=$(printf '%s\n' "$plan" | sed -n 's/^install //p')
  printf '%s\n' "$plan" | sed -n 's/^keep /install-carried-wheels: already installed, kept: /p'
  if [ -z "$wheels" ]; then
    echo "install-carried-wheels: nothing to install from $dir"
    continue
  fi
  # shellcheck disable=SC2086  # one wheel path per word (the paths have no spaces: wheel names and .gpu/...)
  if "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
       $wheels; then
    for wheel in $wheels; do
      name=$(basename "$wheel" | cut -d- -f1)
      echo "install-carried-wheels: installed $name $("$python" -c "import re, sys; from importlib import metadata
print(metadata.version(re.sub(r'[-_.]+', '-', sys.argv[1]).lower()))" "$name" 2>/dev/null || echo '?') from $dir"
    done
  else
    echo "install-carried-wheels: pip install from $dir FAILED"
    status=1
  fi
done
exit $status
