"""Finding, loading and registering hawk_jax's FFI library (libhawk_jax_ffi.so, built by CMakeLists.txt).

The library is loaded on first use, not at import: the package imports on a machine without a GPU or without the
library (the argument checks, the parameter-tree helpers and the flax module's parameters need neither), and the
first call that needs a kernel says what is missing.

Where the library is looked for, first found wins:
1. ``HAWK_JAX_LIBRARY``: a path to the .so;
2. beside this file (``pip install ./examples/jax`` puts it there);
3. ``build-jax/libhawk_jax_ffi.so`` at the root of the hawk checkout this package sits in (the development build,
   ``cmake -S examples/jax -B build-jax -G Ninja && cmake --build build-jax``).
"""

from __future__ import annotations

import ctypes
import os
import pathlib
import threading
from typing import Optional

from ._version import __version__

LIBRARY_NAME = "libhawk_jax_ffi.so"

#: FFI target name (as registered with XLA) -> the handler's symbol in the library
TARGETS = {
    "hawk_rglru_forward": "hawk_jax_rglru_forward",
    "hawk_rglru_backward": "hawk_jax_rglru_backward",
    "hawk_rglru_decode": "hawk_jax_rglru_decode",
    "hawk_gate_residual_forward": "hawk_jax_gate_residual_forward",
    "hawk_gate_residual_backward": "hawk_jax_gate_residual_backward",
}

_lock = threading.Lock()
_library: Optional[ctypes.CDLL] = None


class LibraryNotFoundError(RuntimeError):
    """hawk_jax's CUDA library is not built, or not where the package looks for it."""


def candidate_paths() -> list[pathlib.Path]:
    """Where the library is looked for, in order (see the module docstring)."""
    here = pathlib.Path(__file__).resolve().parent
    paths = []
    if os.environ.get("HAWK_JAX_LIBRARY"):
        paths.append(pathlib.Path(os.environ["HAWK_JAX_LIBRARY"]))
    paths.append(here / LIBRARY_NAME)
    paths.append(here.parent.parent.parent / "build-jax" / LIBRARY_NAME)  # examples/jax/hawk_jax -> the checkout
    return paths


def _declare(lib: ctypes.CDLL) -> None:
    """The C signatures of the library's query functions (csrc/*_ffi.cu, csrc/library_info.cc)."""
    i32, i64 = ctypes.c_int32, ctypes.c_int64
    lib.hawk_jax_version.restype = ctypes.c_char_p
    lib.hawk_jax_version.argtypes = []
    lib.hawk_jax_rglru_time_chunk.restype = i64
    lib.hawk_jax_rglru_time_chunk.argtypes = []
    lib.hawk_jax_rglru_forward_workspace_bytes.restype = i64
    lib.hawk_jax_rglru_forward_workspace_bytes.argtypes = [i64, i64, i64, i64, i32, i32, i32]
    lib.hawk_jax_rglru_backward_workspace_bytes.restype = i64
    lib.hawk_jax_rglru_backward_workspace_bytes.argtypes = [i64, i64, i64, i64, i32, i32, i32]
    lib.hawk_jax_rglru_backward_least_workspace_bytes.restype = i64
    lib.hawk_jax_rglru_backward_least_workspace_bytes.argtypes = [i64, i64, i64, i64, i32, i32, i32]
    lib.hawk_jax_rglru_backward_capped_workspace_bytes.restype = i64
    lib.hawk_jax_rglru_backward_capped_workspace_bytes.argtypes = [i64, i64, i64, i64, i32, i32, i32, i64]
    for name in ("hawk_jax_gate_residual_forward_workspace_bytes", "hawk_jax_gate_residual_backward_workspace_bytes"):
        function = getattr(lib, name)
        function.restype = i64
        function.argtypes = [i64, i64, i64, i32, i32, i32, i64, i64, i32]


def library() -> ctypes.CDLL:
    """The loaded library, its FFI targets registered with JAX for the CUDA platform (once per process)."""
    global _library
    if _library is not None:
        return _library
    with _lock:
        if _library is not None:
            return _library
        path = next((p for p in candidate_paths() if p.is_file()), None)
        if path is None:
            raise LibraryNotFoundError(
                "hawk_jax: the CUDA library libhawk_jax_ffi.so is not built. Build and install the package with "
                "`pip install --no-build-isolation ./examples/jax`, or build it in place with `cmake -S examples/jax "
                "-B build-jax -G Ninja && cmake --build build-jax` (or point HAWK_JAX_LIBRARY at the .so). Looked "
                "in: " + ", ".join(str(p) for p in candidate_paths()))
        lib = ctypes.CDLL(str(path))
        _declare(lib)
        built = lib.hawk_jax_version().decode()
        if built != __version__:
            raise LibraryNotFoundError(
                f"hawk_jax {__version__}: the library at {path} was built from hawk {built}; rebuild it from this "
                "checkout (the handlers' argument lists may differ between versions)")
        import jax  # here, not at module import: registering needs JAX's FFI only when a kernel is wanted

        for target, symbol in TARGETS.items():
            jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(getattr(lib, symbol)), platform="CUDA")
        _library = lib
        return lib


def library_path() -> Optional[pathlib.Path]:
    """Where the library would be loaded from, or None when it is not built."""
    return next((p for p in candidate_paths() if p.is_file()), None)
