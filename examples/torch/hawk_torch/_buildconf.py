"""What the ahead-of-time build (setup.py) and the JIT build (_build.py) share: the version, the CUDA
architectures and the compiler flags. No torch and no relative import here: setup.py and the CPU tests load this
file on its own (by path), before torch or the package can be imported.

Architectures, in order of precedence:

1. ``TORCH_CUDA_ARCH_LIST`` (torch's variable, e.g. ``"9.0"`` or ``"8.0;9.0+PTX"``);
2. ``HAWK_TORCH_ARCH`` (the older name, same syntax; the JIT build's variable so far);
3. the compute capabilities of the visible GPUs (each one's SASS, the highest also as PTX unless it is 9.0: an
   H100 / H200 gets the sm_90a build below instead);
4. with no GPU visible: ``DEFAULT_ARCH_LIST``, every architecture from Ampere on that nvcc 13.0 builds and
   hawk's headers compile for, with PTX for the newest so that later GPUs can JIT-compile it.

What is compiled (``compiled_arch_list``): every plain ``9.0`` becomes ``9.0a``, Hopper's feature set, and then
``nvcc_flags`` adds ``-DHAWK_BUILD_SM90A`` (unless a plain sm_90 pass remains, e.g. from ``9.0+PTX``), so that
``hawk::rglru::forward`` may run the Hopper chunked forward (wgmma) where it pays. ``9.0+PTX`` keeps portable
compute_90 code and the other kernels.
"""

from __future__ import annotations

import pathlib
import re
from typing import Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

#: with no GPU visible and no list given: A100, A10/RTX 30, L4/L40S/RTX 40, H100/H200, B200, RTX 50 (+PTX)
DEFAULT_ARCH_LIST = "8.0;8.6;8.9;9.0;10.0;12.0+PTX"

#: the extension's name: the JIT library and the wheel's extension module share it (TORCH_EXTENSION_NAME)
EXTENSION_NAME = "hawk_torch_ops"

#: host compiler flags of ops.cpp (the torch binding)
CXX_FLAGS = ["-O3", "-std=c++17"]

# torch's default nvcc flags switch off the half/bfloat16 operators and conversions; hawk's headers use them (and
# include no torch header), so they are switched back on for hawk's translation units. The JIT build and the
# wheel pass exactly these, so both compile the kernels to the same bits for one architecture.
NVCC_FLAGS = [
    "-O3",
    "-std=c++17",
    "--expt-relaxed-constexpr",
    "-lineinfo",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_HALF2_OPERATORS__",
]

#: the translation units, relative to examples/torch
SOURCES = ["csrc/ops.cpp", "csrc/rglru_launch.cu", "csrc/gate_residual_launch.cu"]


def cmake_project_version(cmakelists: pathlib.Path) -> str:
    """The VERSION of ``project(hawk VERSION x.y.z ...)`` in the top-level CMakeLists.txt: the one version of the
    CMake package and the wheel."""
    text = pathlib.Path(cmakelists).read_text()
    match = re.search(r"project\s*\(\s*hawk\b[^)]*?\bVERSION\s+([0-9]+(?:\.[0-9]+){0,3})", text)
    if match is None:
        raise RuntimeError(f"no 'project(hawk VERSION x.y.z ...)' in {cmakelists}")
    return match.group(1)


class Arch(NamedTuple):
    major: int
    minor: int
    ptx: bool  # also embedded as PTX (compute_XY), which the driver can compile for any later GPU

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}{'+PTX' if self.ptx else ''}"


def parse_arch_list(text: str, where: str = "TORCH_CUDA_ARCH_LIST") -> List[Arch]:
    """``"8.0;8.6 9.0+PTX"`` (semicolons or spaces) -> [Arch(8, 0, False), Arch(8, 6, False), Arch(9, 0, True)]."""
    archs = []
    for item in re.split(r"[;\s]+", text.strip()):
        if not item:
            continue
        match = re.fullmatch(r"([0-9]+)\.([0-9]+)a?(\+PTX)?", item)
        if match is None:
            raise ValueError(f"{where}: cannot read {item!r} in {text!r}; expected entries like 8.0, 9.0 or 12.0+PTX")
        archs.append(Arch(int(match.group(1)), int(match.group(2)), match.group(3) is not None))
    if not archs:
        raise ValueError(f"{where} is empty")
    return archs


def format_arch_list(archs: Iterable[Arch]) -> str:
    return ";".join(str(a) for a in archs)


def resolve_arch_list(environ: Mapping[str, str], capabilities: Sequence[Tuple[int, int]]) -> Tuple[str, str]:
    """The architecture list to build for and where it came from (see the module docstring for the order).

    ``capabilities``: the (major, minor) of each visible GPU. Returns (list, source), e.g. ("9.0+PTX", "the visible
    GPU") or (DEFAULT_ARCH_LIST, "the default list, as no GPU is visible")."""
    for name in ("TORCH_CUDA_ARCH_LIST", "HAWK_TORCH_ARCH"):
        value = environ.get(name, "").strip()
        if value:
            parse_arch_list(value, name)  # validates; torch gets the list as written
            return value, name
    if capabilities:
        found = sorted(set((int(major), int(minor)) for major, minor in capabilities))
        archs = [Arch(major, minor, i == len(found) - 1 and (major, minor) != (9, 0))
                 for i, (major, minor) in enumerate(found)]
        return format_arch_list(archs), "the visible GPU" + ("s" if len(found) > 1 else "")
    return DEFAULT_ARCH_LIST, "the default list, as no GPU is visible"


def compiled_arch_list(arch_list: str) -> str:
    """The list torch compiles for: ``arch_list`` with each plain 9.0 entry as 9.0a (the sm_90a feature set)."""
    entries = [item for item in re.split(r"[;\s]+", arch_list.strip()) if item]
    return ";".join("9.0a" if item == "9.0" else item for item in entries)


def nvcc_flags(compiled: str) -> List[str]:
    """NVCC_FLAGS for a compiled list (``compiled_arch_list``), with -DHAWK_BUILD_SM90A when it builds sm_90a and
    no plain sm_90 pass (hawk's headers refuse the definition in a plain sm_90 pass)."""
    entries = [item for item in re.split(r"[;\s]+", compiled.strip()) if item]
    plain_90 = any(item.startswith("9.0") and not item.startswith("9.0a") for item in entries)
    sm90a = any(item.startswith("9.0a") for item in entries)
    return list(NVCC_FLAGS) + (["-DHAWK_BUILD_SM90A"] if sm90a and not plain_90 else [])


def runs_on(archs: Sequence[Arch], capability: Tuple[int, int]) -> bool:
    """Whether code built for ``archs`` runs on a GPU of compute capability ``capability``: a cubin (SASS) for
    sm_XY runs on the same major version with minor >= Y; PTX for compute_XY is compiled by the driver for any GPU
    of capability >= X.Y."""
    major, minor = capability
    for arch in archs:
        if arch.major == major and arch.minor <= minor:
            return True
        if arch.ptx and (arch.major, arch.minor) <= (major, minor):
            return True
    return False


def unsupported_devices_message(archs: Sequence[Arch], devices: Sequence[Tuple[int, str, Tuple[int, int]]],
                                how_built: str) -> Optional[str]:
    """None when every device (index, name, capability) can run code built for ``archs``; otherwise the import
    error's message, naming the devices, their capabilities and the architectures the library holds."""
    bad = [(index, name, cap) for index, name, cap in devices if not runs_on(archs, cap)]
    if not bad:
        return None
    listed = ", ".join(f"cuda:{index} {name} (compute capability {cap[0]}.{cap[1]})" for index, name, cap in bad)
    wanted = ";".join(sorted({f"{cap[0]}.{cap[1]}" for _, _, cap in bad}))
    return (f"hawk_torch: the operator library ({how_built}) holds code for CUDA architectures "
            f"{format_arch_list(archs)}, which cannot run on {listed}. Rebuild it for this GPU, e.g. "
            f"TORCH_CUDA_ARCH_LIST=\"{wanted}\" pip install --no-build-isolation --force-reinstall "
            f"./examples/torch (or hide the GPU with CUDA_VISIBLE_DEVICES)")
