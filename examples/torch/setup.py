"""Builds hawk_torch's wheel with the operator library compiled ahead of time.

    pip install --no-build-isolation ./examples/torch          # or: pip wheel --no-build-isolation --no-deps ...

Why setuptools with torch's CUDAExtension / BuildExtension (and not scikit-build-core over hawk's CMake): the JIT
development build (_build.py) is torch.utils.cpp_extension too, so both builds run the same compiler driver with
the same flags (_buildconf.py) and give the kernels the same bits; torch's CMake config would have to be matched
to those flags by hand.

hawk's headers live at the repository root (include/hawk), outside this folder: the build compiles against them
where they are, so it needs a clone (pip builds in place since pip 21.3), and copies them into the wheel
(hawk_torch/include, see hawk_torch.get_include()) together with the LICENSE and _build_info.py (version,
architectures, the torch it was built against, read at import).

Build environment: the torch you will run with (the library links its C++ API: build with --no-build-isolation, or
pip builds against the newest torch from PyPI), nvcc, ninja (MAX_JOBS=N parallel jobs). Architectures:
TORCH_CUDA_ARCH_LIST, else the visible GPUs, else _buildconf.DEFAULT_ARCH_LIST (see _buildconf.py).
"""

import importlib.util
import os
import pathlib
import shutil
import sys

from setuptools import setup

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
INCLUDE = REPO / "include"


def _load_buildconf():
    # By path: importing the package would import torch and check for a GPU.
    spec = importlib.util.spec_from_file_location("hawk_torch_buildconf", HERE / "hawk_torch" / "_buildconf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


conf = _load_buildconf()
if not (INCLUDE / "hawk").is_dir():
    sys.exit(f"hawk_torch: hawk's headers are not at {INCLUDE}: build hawk_torch from a clone of hawk "
             "(pip install --no-build-isolation ./examples/torch at the repository root)")
try:
    import torch
    from torch.utils.cpp_extension import BuildExtension, CUDAExtension
except ImportError as error:
    sys.exit(f"hawk_torch: building needs torch ({error}). Install torch first, then build against it: "
             "pip install --no-build-isolation ./examples/torch")

VERSION = conf.cmake_project_version(REPO / "CMakeLists.txt")
_capabilities = ([torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())]
                 if torch.cuda.is_available() else [])
_REQUESTED, ARCH_SOURCE = conf.resolve_arch_list(os.environ, _capabilities)
ARCH_LIST = conf.compiled_arch_list(_REQUESTED)  # 9.0 as 9.0a: the Hopper chunked forward (_buildconf)


class BuildExtensionAndData(BuildExtension):
    """Compiles the library for ARCH_LIST, then writes _build_info.py beside it and, into a wheel (not an in-place
    build for an editable install, which reads the checkout's headers), hawk's headers and the LICENSE."""

    def build_extensions(self):
        os.environ["TORCH_CUDA_ARCH_LIST"] = ARCH_LIST  # torch's BuildExtension reads it from the environment
        print(f"hawk_torch {VERSION}: compiling for CUDA architectures {ARCH_LIST} ({ARCH_SOURCE})", file=sys.stderr)
        super().build_extensions()

    def run(self):
        super().run()
        package = pathlib.Path(self.get_ext_fullpath(self.extensions[0].name)).parent
        (package / "_build_info.py").write_text(
            "# Written by setup.py when it compiled the operator library beside this file.\n"
            f"VERSION = {VERSION!r}\n"
            f"ARCH_LIST = {ARCH_LIST!r}\n"
            f"ARCH_SOURCE = {ARCH_SOURCE!r}\n"
            f"TORCH_VERSION = {torch.__version__!r}\n"
            f"TORCH_CUDA = {torch.version.cuda!r}\n")
        if not self.inplace:
            shutil.copytree(INCLUDE / "hawk", package / "include" / "hawk", dirs_exist_ok=True)
            shutil.copy2(REPO / "LICENSE", package / "LICENSE")


setup(
    version=VERSION,
    ext_modules=[
        CUDAExtension(
            name=f"hawk_torch.{conf.EXTENSION_NAME}",
            sources=conf.SOURCES,  # relative to this folder, as setuptools wants them
            include_dirs=[str(INCLUDE), str(HERE / "csrc")],
            extra_compile_args={"cxx": list(conf.CXX_FLAGS), "nvcc": conf.nvcc_flags(ARCH_LIST)},
        )
    ],
    cmdclass={"build_ext": BuildExtensionAndData},
)
