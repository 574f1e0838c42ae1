"""Builds hawk_jax with its FFI library: CMakeLists.txt (beside this file) compiled into a temporary build folder
and libhawk_jax_ffi.so copied into the package, so that the installed package finds it beside its modules.

    pip install --no-build-isolation ./examples/jax

Needs, where it builds: cmake >= 3.24, nvcc, and the jax the package will run with (its FFI headers;
--no-build-isolation uses the installed one). HAWK_JAX_CUDA_ARCHITECTURES (default 90) picks the GPUs; CMAKE_GENERATOR
and CMAKE_BUILD_PARALLEL_LEVEL are CMake's own. hawk's headers are read from the checkout (../../include): build from
a clone.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = pathlib.Path(__file__).resolve().parent
LIBRARY = "libhawk_jax_ffi.so"


class BuildWithLibrary(build_py):
    """build_py, then the FFI library into the built package."""

    def run(self):
        super().run()
        with tempfile.TemporaryDirectory(prefix="hawk_jax_build_") as build:
            architectures = os.environ.get("HAWK_JAX_CUDA_ARCHITECTURES", "90")
            configure = ["cmake", "-S", str(HERE), "-B", build, f"-DPython_EXECUTABLE={sys.executable}",
                         f"-DCMAKE_CUDA_ARCHITECTURES={architectures}", "-DCMAKE_BUILD_TYPE=Release"]
            if shutil.which("ninja") and "CMAKE_GENERATOR" not in os.environ:
                configure += ["-G", "Ninja"]
            subprocess.run(configure, check=True)
            subprocess.run(["cmake", "--build", build], check=True)
            target = pathlib.Path(self.build_lib) / "hawk_jax"
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(pathlib.Path(build) / LIBRARY, target / LIBRARY)


class BinaryDistribution(Distribution):
    """A wheel with a compiled library is platform-specific, though no setuptools Extension builds it."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)
