"""Packaging: the wheel's metadata and its one version with CMake, the architecture policy, and the import errors
(no GPU; a GPU the library has no code for). Tests marked ``cpu`` need no GPU and run in CI (ctest python:cpu)."""

from __future__ import annotations

import email.parser
import importlib.metadata
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import torch

from support import load_standalone, requires_cuda

EXAMPLE = pathlib.Path(__file__).resolve().parents[1]
REPO = EXAMPLE.parents[1]
INSTALLED = os.environ.get("HAWK_TORCH_TEST_INSTALLED") == "1"
buildconf = load_standalone("_buildconf")


def _import_in_subprocess(**environment):
    """``import hawk_torch`` in a fresh interpreter (the checkout's package, or the installed one)."""
    env = dict(os.environ, **environment)
    if not INSTALLED:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(EXAMPLE), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", "import hawk_torch"], capture_output=True, text=True, env=env,
                          cwd=pathlib.Path(__file__).parent, timeout=300)


def _arch_list_of_the_library_under_test() -> str:
    if compiled_library_present():
        return load_standalone("_build_info").ARCH_LIST
    return buildconf.compiled_arch_list(buildconf.resolve_arch_list(os.environ, [])[0])  # what the JIT build compiles


def compiled_library_present() -> bool:
    package = pathlib.Path(importlib.util.find_spec("hawk_torch").submodule_search_locations[0])
    return os.environ.get("HAWK_TORCH_JIT") != "1" and any(package.glob(f"{buildconf.EXTENSION_NAME}.*.so"))


# ---- the version -------------------------------------------------------------------------------------------------


@pytest.mark.cpu
def test_the_version_is_read_from_cmakes_project_call(tmp_path):
    cmakelists = tmp_path / "CMakeLists.txt"
    cmakelists.write_text('cmake_minimum_required(VERSION 3.24)\nproject(hawk\n  VERSION 2.13.7 DESCRIPTION "x (y)"'
                          " LANGUAGES CXX)\n")
    assert buildconf.cmake_project_version(cmakelists) == "2.13.7"
    cmakelists.write_text("cmake_minimum_required(VERSION 3.24)\nproject(other VERSION 1.0)\n")
    with pytest.raises(RuntimeError, match="project.hawk VERSION"):
        buildconf.cmake_project_version(cmakelists)


@pytest.mark.cpu
def test_cmake_and_the_wheel_have_one_version():
    """CMake's own reading (the hawkConfigVersion.cmake it wrote) equals the wheel's."""
    binary = os.environ.get("HAWK_CMAKE_BINARY_DIR")
    if binary is None:
        pytest.skip("needs a configured CMake build folder: ctest (python:cpu) passes HAWK_CMAKE_BINARY_DIR")
    config = (pathlib.Path(binary) / "hawkConfigVersion.cmake").read_text()
    cmake_version = re.search(r'set\(PACKAGE_VERSION "([^"]+)"\)', config).group(1)
    assert cmake_version == buildconf.cmake_project_version(REPO / "CMakeLists.txt")


@pytest.mark.cpu
def test_wheel_metadata_has_the_version_license_and_description(tmp_path):
    # In a subprocess: setuptools must be imported before torch (which imports distutils), and setup.py runs as pip
    # runs it, through the PEP 517 hook.
    code = ("import sys\nfrom setuptools import build_meta\n"
            "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=EXAMPLE, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    dist_info = tmp_path / done.stdout.strip().splitlines()[-1]
    metadata = email.parser.Parser().parsestr((dist_info / "METADATA").read_text())
    assert metadata["Name"].replace("-", "_") == "hawk_torch"
    assert metadata["Version"] == buildconf.cmake_project_version(REPO / "CMakeLists.txt")
    assert metadata["License"] == "Apache-2.0"
    assert "License :: OSI Approved :: Apache Software License" in metadata.get_all("Classifier")
    assert "RG-LRU" in metadata["Summary"]
    assert any(re.fullmatch(r"torch\s*>=\s*2\.4", r) for r in metadata.get_all("Requires-Dist")), metadata


# ---- the architectures -------------------------------------------------------------------------------------------


@pytest.mark.cpu
def test_the_architecture_list_comes_from_the_environment_then_the_gpus_then_the_default():
    resolve = buildconf.resolve_arch_list
    gpus = [(9, 0), (8, 0), (9, 0)]
    assert resolve({"TORCH_CUDA_ARCH_LIST": "8.6", "HAWK_TORCH_ARCH": "9.0"}, gpus) == ("8.6", "TORCH_CUDA_ARCH_LIST")
    assert resolve({"TORCH_CUDA_ARCH_LIST": " ", "HAWK_TORCH_ARCH": "10.0"}, gpus) == ("10.0", "HAWK_TORCH_ARCH")
    assert resolve({}, gpus) == ("8.0;9.0", "the visible GPUs")  # 9.0 compiles as 9.0a (compiled_arch_list)
    assert resolve({}, [(9, 0), (10, 0)]) == ("9.0;10.0+PTX", "the visible GPUs")
    assert resolve({}, [(12, 0)]) == ("12.0+PTX", "the visible GPU")
    arch_list, source = resolve({}, [])
    assert arch_list == buildconf.DEFAULT_ARCH_LIST and "no GPU" in source
    with pytest.raises(ValueError, match="TORCH_CUDA_ARCH_LIST: cannot read 'sm_90'"):
        resolve({"TORCH_CUDA_ARCH_LIST": "sm_90"}, [])


@pytest.mark.cpu
def test_hopper_compiles_with_its_feature_set_and_the_promise_that_lets_forward_use_it():
    assert buildconf.compiled_arch_list("8.0;9.0 10.0;12.0+PTX") == "8.0;9.0a;10.0;12.0+PTX"
    assert buildconf.compiled_arch_list("9.0+PTX") == "9.0+PTX"  # portable PTX keeps a plain sm_90 pass
    assert "-DHAWK_BUILD_SM90A" in buildconf.nvcc_flags("8.0;9.0a;12.0+PTX")
    assert "-DHAWK_BUILD_SM90A" not in buildconf.nvcc_flags("9.0a;9.0+PTX")  # a plain sm_90 pass would #error
    assert "-DHAWK_BUILD_SM90A" not in buildconf.nvcc_flags("8.0;8.6")
    assert buildconf.nvcc_flags("8.0")[: len(buildconf.NVCC_FLAGS)] == buildconf.NVCC_FLAGS
    assert buildconf.parse_arch_list("9.0a") == [buildconf.Arch(9, 0, False)]


@pytest.mark.cpu
def test_the_default_architectures_are_ones_nvcc_builds():
    nvcc = shutil.which("nvcc") or (shutil.which("nvcc", path="/usr/local/cuda/bin"))
    if nvcc is None:
        pytest.skip("no nvcc")
    listed = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True, check=True).stdout.split()
    default = buildconf.parse_arch_list(buildconf.DEFAULT_ARCH_LIST)
    assert min(default) >= (8, 0, False) and default[-1].ptx
    for arch in default:
        assert f"compute_{arch.major}{arch.minor}" in listed, (arch, listed)


@pytest.mark.cpu
def test_which_gpus_a_library_runs_on():
    def runs(arch_list, capability):
        return buildconf.runs_on(buildconf.parse_arch_list(arch_list), capability)

    assert runs("8.0", (8, 6)) and runs("8.0", (8, 0))  # a cubin runs on later minors of its major
    assert not runs("8.6", (8, 0)) and not runs("8.0", (9, 0)) and not runs("9.0", (10, 0))
    assert runs("8.0+PTX", (9, 0)) and runs("9.0+PTX", (12, 0))  # PTX: any later GPU
    assert not runs("9.0+PTX", (8, 9))
    assert runs("8.0;8.6;8.9;9.0;10.0;12.0+PTX", (10, 3)) and runs("8.0;8.6;8.9;9.0;10.0;12.0+PTX", (12, 1))


@pytest.mark.cpu
def test_the_architecture_error_names_the_gpu_and_the_architectures():
    archs = buildconf.parse_arch_list("8.0;8.6")
    devices = [(0, "NVIDIA A100", (8, 0)), (1, "NVIDIA H200", (9, 0))]
    message = buildconf.unsupported_devices_message(archs, devices, "installed at /x/hawk_torch_ops.so")
    assert "cuda:1 NVIDIA H200 (compute capability 9.0)" in message and "A100" not in message
    assert "8.0;8.6" in message and 'TORCH_CUDA_ARCH_LIST="9.0"' in message
    assert buildconf.unsupported_devices_message(archs, devices[:1], "") is None


# ---- the import errors -------------------------------------------------------------------------------------------


@pytest.mark.cpu
def test_import_without_a_gpu_says_so_and_names_the_architectures():
    done = _import_in_subprocess(CUDA_VISIBLE_DEVICES="")  # hides any GPU; on a machine without one, the same
    assert done.returncode != 0
    assert "ImportError: hawk_torch: no CUDA device is visible" in done.stderr, done.stderr[-3000:]
    assert f"architectures {_arch_list_of_the_library_under_test()}." in done.stderr, done.stderr[-3000:]


@requires_cuda
def test_import_on_a_gpu_the_library_has_no_code_for_names_both():
    major, minor = torch.cuda.get_device_capability(0)
    other = "8.0" if major != 8 else "9.0"
    # the JIT build's list is checked before anything is compiled, so this costs no build
    done = _import_in_subprocess(HAWK_TORCH_JIT="1", TORCH_CUDA_ARCH_LIST=other)
    assert done.returncode != 0
    name = torch.cuda.get_device_name(0)
    assert f"cuda:0 {name} (compute capability {major}.{minor})" in done.stderr, done.stderr[-3000:]
    assert f"architectures {other}, which cannot run" in done.stderr, done.stderr[-3000:]


@requires_cuda
def test_the_package_under_test_is_the_one_meant():
    """Under HAWK_TORCH_TEST_INSTALLED=1 (run_wheel_check_on_gpu.sh): the installed wheel, with its compiled library
    and headers, outside the source tree; otherwise the checkout's. Either way hawk's one version."""
    import hawk_torch

    info = hawk_torch.build_info()
    version = buildconf.cmake_project_version(REPO / "CMakeLists.txt")
    assert hawk_torch.__version__ == info.version == version
    package = pathlib.Path(hawk_torch.__file__).resolve().parent
    assert (pathlib.Path(hawk_torch.get_include()) / "hawk" / "hawk.cuh").is_file()
    if INSTALLED:
        assert REPO not in package.parents, package
        assert info.mode == "installed" and pathlib.Path(info.library).parent == package, info
        assert importlib.metadata.version("hawk_torch") == version
        assert pathlib.Path(hawk_torch.get_include()) == package / "include"
        assert (package / "LICENSE").read_text() == (REPO / "LICENSE").read_text()
        if os.environ.get("TORCH_CUDA_ARCH_LIST"):  # what was compiled for it: 9.0 as 9.0a (compiled_arch_list)
            assert info.arch_list == buildconf.compiled_arch_list(os.environ["TORCH_CUDA_ARCH_LIST"])
    else:
        assert package == EXAMPLE / "hawk_torch"
