"""Finds, checks and loads the ``hawk::`` operator library.

Two ways to get it:

* **installed** (``pip install --no-build-isolation ./examples/torch``): setup.py compiled it ahead of time into
  the package as ``hawk_torch_ops.<abi>.so`` next to ``_build_info.py`` (version, CUDA architectures, the torch
  it was built against) and a copy of hawk's headers (``get_include()``);
* **JIT** (a checkout on ``PYTHONPATH``, no compiled library in the package, or ``HAWK_TORCH_JIT=1``):
  ``torch.utils.cpp_extension.load`` compiles the three translation units on first import, in parallel with ninja,
  and caches them under ``HAWK_TORCH_BUILD_DIR`` (default ``build-torch/`` at the repository root); ninja redoes
  only what a changed source or header touches. For development.

Both compile with the flags of ``_buildconf`` and for the architectures it resolves (``TORCH_CUDA_ARCH_LIST``,
else ``HAWK_TORCH_ARCH``, else the visible GPUs). Before loading anything, ``load_library`` checks the visible
GPUs: none, or one the library has no code for, is an ImportError that names the GPU and the architectures.
Importing hawk_torch therefore initialises CUDA (``torch.cuda.get_device_capability``).

Environment:
  HAWK_TORCH_JIT=1       use the JIT build even where a compiled library is installed
  HAWK_TORCH_BUILD_DIR   where the JIT build's objects and library go
  HAWK_TORCH_VERBOSE=1   print the JIT build's compiler commands
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import os
import pathlib
from typing import List, NamedTuple, Optional, Tuple

from . import _buildconf

_PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
_EXAMPLE_DIR = _PACKAGE_DIR.parent
_REPO = _EXAMPLE_DIR.parent.parent

_loaded: Optional["BuildInfo"] = None


class BuildInfo(NamedTuple):
    """How the loaded operator library was built (``hawk_torch.build_info()``)."""

    version: str  # hawk's version: project(hawk VERSION ...) of the top-level CMakeLists.txt
    mode: str  # "installed" (compiled by setup.py) or "jit"
    library: str  # path of the shared library (the JIT build's, once built)
    arch_list: str  # TORCH_CUDA_ARCH_LIST it was (or is being) built for
    arch_source: str  # where that list came from
    torch_version: str  # the torch it was built against


def build_directory() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("HAWK_TORCH_BUILD_DIR", _REPO / "build-torch"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def compiled_library() -> Optional[pathlib.Path]:
    """The library setup.py compiled into the package, or None (then the JIT build is used)."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = _PACKAGE_DIR / (_buildconf.EXTENSION_NAME + suffix)
        if path.is_file():
            return path
    return None


def get_include() -> str:
    """The directory holding hawk's headers (``hawk/...``): the copy in an installed package, else the checkout's
    ``include/``. For building your own extensions against hawk."""
    for candidate in (_PACKAGE_DIR / "include", _REPO / "include"):
        if (candidate / "hawk").is_dir():
            return str(candidate)
    raise RuntimeError(f"hawk_torch: hawk's headers are neither in {_PACKAGE_DIR / 'include'} nor in "
                       f"{_REPO / 'include'}")


def _visible_devices() -> List[Tuple[int, str, Tuple[int, int]]]:
    import torch

    if not torch.cuda.is_available():
        return []
    return [(i, torch.cuda.get_device_name(i), tuple(torch.cuda.get_device_capability(i)))
            for i in range(torch.cuda.device_count())]


def _no_device_message(how_built: str, arch_list: str) -> str:
    import torch

    if torch.version.cuda is None:
        why = f"this torch ({torch.__version__}) is built without CUDA"
    else:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        why = (f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device"
               + ("" if visible is None else f" (CUDA_VISIBLE_DEVICES={visible!r})"))
    return (f"hawk_torch: no CUDA device is visible: {why}. hawk's operators run only on NVIDIA GPUs; the operator "
            f"library ({how_built}) is for CUDA architectures {arch_list}.")


def _check_devices(how_built: str, arch_list: str) -> None:
    devices = _visible_devices()
    if not devices:
        raise ImportError(_no_device_message(how_built, arch_list))
    message = _buildconf.unsupported_devices_message(_buildconf.parse_arch_list(arch_list), devices, how_built)
    if message is not None:
        raise ImportError(message)


def _installed_build_info(library: pathlib.Path) -> BuildInfo:
    import torch

    try:
        from . import _build_info
    except ImportError as error:
        raise ImportError(f"hawk_torch: {library} has no _build_info.py beside it (written by setup.py); reinstall "
                          "hawk_torch, or delete the library to use the JIT build") from error
    built, running = _build_info.TORCH_VERSION, torch.__version__
    # The library links torch's C++ API, which is only stable within a minor release and one CUDA major version.
    if built.split("+")[0].split(".")[:2] != running.split("+")[0].split(".")[:2] or \
            str(_build_info.TORCH_CUDA).split(".")[0] != str(torch.version.cuda).split(".")[0]:
        raise ImportError(f"hawk_torch: {library.name} was built against torch {built} (CUDA {_build_info.TORCH_CUDA}) "
                          f"but this is torch {running} (CUDA {torch.version.cuda}); reinstall hawk_torch against "
                          "this torch: pip install --no-build-isolation --force-reinstall ./examples/torch")
    return BuildInfo(_build_info.VERSION, "installed", str(library), _build_info.ARCH_LIST, _build_info.ARCH_SOURCE,
                     built)


@contextlib.contextmanager
def _arch_list_in_environment(arch_list: str):
    """torch's build reads TORCH_CUDA_ARCH_LIST from the environment: set it for the build only."""
    previous = os.environ.get("TORCH_CUDA_ARCH_LIST")
    os.environ["TORCH_CUDA_ARCH_LIST"] = arch_list
    try:
        yield
    finally:
        if previous is None:
            del os.environ["TORCH_CUDA_ARCH_LIST"]
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = previous


def _jit_build(arch_list: str) -> str:
    from torch.utils import cpp_extension

    include = _REPO / "include"
    if not (include / "hawk").is_dir() or not (_EXAMPLE_DIR / "csrc").is_dir():
        raise ImportError(f"hawk_torch: no compiled operator library in {_PACKAGE_DIR}, and no checkout to build one "
                          f"from (hawk's headers {include}, sources {_EXAMPLE_DIR / 'csrc'}); install hawk_torch with "
                          "pip install --no-build-isolation ./examples/torch")
    with _arch_list_in_environment(arch_list):
        cpp_extension.load(
            name=_buildconf.EXTENSION_NAME,
            sources=[str(_EXAMPLE_DIR / source) for source in _buildconf.SOURCES],
            extra_include_paths=[str(include), str(_EXAMPLE_DIR / "csrc")],
            extra_cflags=list(_buildconf.CXX_FLAGS),
            extra_cuda_cflags=_buildconf.nvcc_flags(arch_list),
            build_directory=str(build_directory()),
            is_python_module=False,
            with_cuda=True,
            verbose=os.environ.get("HAWK_TORCH_VERBOSE") == "1",
        )
    # load(is_python_module=False) has loaded the library into the process (torch.ops.load_library).
    return str(build_directory() / f"{_buildconf.EXTENSION_NAME}.so")


def load_library() -> BuildInfo:
    """Check the GPUs, then load (JIT: build first, if needed) the operator library; registers torch.ops.hawk.*.
    Idempotent. Raises ImportError when no GPU is visible or the library cannot run on one of them."""
    global _loaded
    if _loaded is not None:
        return _loaded
    import torch

    library = None if os.environ.get("HAWK_TORCH_JIT") == "1" else compiled_library()
    if library is not None:
        info = _installed_build_info(library)
        _check_devices(f"installed at {library}", info.arch_list)
        torch.ops.load_library(str(library))
    else:
        devices = _visible_devices()
        requested, source = _buildconf.resolve_arch_list(os.environ, [cap for _, _, cap in devices])
        arch_list = _buildconf.compiled_arch_list(requested)
        _check_devices(f"JIT build, architectures from {source}", arch_list)
        library_path = _jit_build(arch_list)  # first: it says clearly when there is no checkout to build from
        version = _buildconf.cmake_project_version(_REPO / "CMakeLists.txt")
        info = BuildInfo(version, "jit", library_path, arch_list, source, torch.__version__)
    _loaded = info
    return info


def build_info() -> BuildInfo:
    """How the loaded operator library was built: version, mode, library path, architectures."""
    return load_library()
