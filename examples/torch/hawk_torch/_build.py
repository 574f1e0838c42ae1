"""Builds (once) and loads the `hawk::` operator library with torch.utils.cpp_extension.

Three translation units, compiled in parallel by ninja: ``csrc/ops.cpp`` (the torch binding, host compiler),
``csrc/rglru_launch.cu`` and ``csrc/gate_residual_launch.cu`` (hawk's default dispatch, nvcc, sm_90 only by
default). The build is cached under ``HAWK_TORCH_BUILD_DIR`` (default: ``build-torch/`` at the repository root) and
is only redone when a source or header changes (ninja tracks the headers through the compilers' depfiles).

Environment:
  HAWK_TORCH_BUILD_DIR   where the objects and the shared library go
  HAWK_TORCH_ARCH        CUDA architectures for TORCH_CUDA_ARCH_LIST (default "9.0")
  HAWK_TORCH_VERBOSE=1   print the compiler commands
"""

from __future__ import annotations

import os
import pathlib

_PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
_EXAMPLE_DIR = _PACKAGE_DIR.parent
_CSRC = _EXAMPLE_DIR / "csrc"
_REPO = _EXAMPLE_DIR.parent.parent
_INCLUDE = _REPO / "include"

_loaded = False


def build_directory() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("HAWK_TORCH_BUILD_DIR", _REPO / "build-torch"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def load_library() -> None:
    """Compile (if needed) and load the operator library; registers torch.ops.hawk.*. Idempotent."""
    global _loaded
    if _loaded:
        return
    from torch.utils import cpp_extension

    if not _INCLUDE.is_dir():
        raise RuntimeError(f"hawk_torch: hawk's headers were not found at {_INCLUDE}; use hawk_torch from a "
                           "checkout of hawk (PYTHONPATH=examples/torch, or pip install -e examples/torch)")
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", os.environ.get("HAWK_TORCH_ARCH", "9.0"))
    # torch's default nvcc flags switch off the half/bfloat16 operators and conversions; hawk's headers use them
    # (and include no torch header), so switch them back on for hawk's translation units.
    undefine = [
        "-U__CUDA_NO_HALF_OPERATORS__",
        "-U__CUDA_NO_HALF_CONVERSIONS__",
        "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
        "-U__CUDA_NO_HALF2_OPERATORS__",
    ]
    cpp_extension.load(
        name="hawk_torch_ops",
        sources=[str(_CSRC / "ops.cpp"), str(_CSRC / "rglru_launch.cu"), str(_CSRC / "gate_residual_launch.cu")],
        extra_include_paths=[str(_INCLUDE), str(_CSRC)],
        extra_cflags=["-O3", "-std=c++17"],
        extra_cuda_cflags=["-O3", "-std=c++17", "--expt-relaxed-constexpr", "-lineinfo", *undefine],
        build_directory=str(build_directory()),
        is_python_module=False,
        with_cuda=True,
        verbose=os.environ.get("HAWK_TORCH_VERBOSE") == "1",
    )
    # load(is_python_module=False) has loaded the library into the process (torch.ops.load_library).
    _loaded = True
