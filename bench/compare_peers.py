#!/usr/bin/env python3
"""hawk's RG-LRU layer (PyTorch binding) against the public PyTorch peers, in one process on one GPU (issue 16).

Every implementation computes the whole RG-LRU layer of SPEC §1 on the same inputs: x [B, L, W] bf16, fp32
parameters (a_param [W], Wx, Wa [H, w, w], bx, ba [H, w]), a document start at t = 0 of every row (canonical
training resets), y [B, L, W] bf16. Rows:

  hawk                       hawk_torch.rglru, fused mode (projections, gate math and scan in hawk's kernels)
  hawk_gate_logits           the einsum projections below (+ bias), then hawk_torch.rglru in gate-logits mode
  fla_chunk                  composed: einsum projections, torch.compile'd gate math, FLA's chunk_hgrn (Triton);
                             its error against hawk is chunk_hgrn's own (FLA_CHUNK_NOTE; the row's scan_check)
  fla_fused_recurrent        composed, with FLA's fused_recurrent_hgrn
  accelerated_scan_triton    composed, with accelerated-scan's Triton scan (accelerated_scan.scalar; [B, W, L])
  accelerated_scan_warp      composed, with accelerated-scan's CUDA warp scan (accelerated_scan.warp: compiled at
                             its first import by torch's cpp_extension, about 2 minutes; this script starts that
                             build in a background process at once and times these rows last)
  recurrentgemma             recurrentgemma's own torch RGLRU layer (its einsum projections, eager gate math and
                             Python loop over time) under bf16 autocast, with hawk's parameters; its time is linear
                             in L with a launch per step, so it runs only up to --rg-max-len (forward) and
                             --rg-backward-max-len (forward + backward)

"Composed" = what a PyTorch user builds from the peers' scans: the block-diagonal projections as cuBLAS einsums
(bf16, weights rounded to bf16 as autocast does), then one torch.compile'd function doing the gate math in fp32
(bias, sigmoids, log a = -8 r softplus(a_param), the sqrt(1 - a²) normalisation with recurrentgemma's capped
derivative, u = x i m) and writing the scan's two inputs in its layout and --scan-dtype (fp32 by default:
accelerated-scan's warp scan with bf16 carries faults at L = 8192, see ../shared/GPU.md), then the scan, then y
cast (and transposed) to bf16. FLA's hgrn recurrence is h_t = exp(g_t) h_{t-1} + x_t, fed g = log a; with no
initial state the reset at t = 0 needs no encoding there (h_{-1} = 0, so a_0 multiplies zero in the forward and
gets a zero gradient), exactly as in SPEC. accelerated-scan gets a with a_0 = 0.

Per row: forward (under torch.no_grad) and forward+backward (torch.autograd.grad of y · dy with respect to x and
the five parameters) GPU time in ms, eager and replayed from a CUDA graph (captured once per rotated input set;
a capture that fails is reported "n/a" with its reason). Timing: CUDA events around K calls issued back to back
(K = 8 for short calls, fewer for long ones), divided by K; the median over repetitions after warm-up; inputs
rotated over enough copies to exceed the H200's 60 MB L2. Accuracy: the max relative error (max |a - b| / max |b|)
of y, and of each gradient, against hawk's on the same inputs.

Peers that are not installed (pip install fla-core accelerated-scan recurrentgemma; the GPU machine gets them as
wheels, bench/install-carried-wheels.sh) are skipped with a message. Writes JSON (--json) and prints a markdown
table last.

    python bench/compare_peers.py --json bench/results/compare_peers-YYYY-MM-DD.json
    python bench/compare_peers.py --quick                       # a smoke run: two shapes, few repetitions
    python bench/compare_peers.py --shapes 4,2048,2048,16 --reps 50
    python bench/compare_peers.py --dry-run                     # CPU only: tiny shapes, no hawk, no timing
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import importlib.util
import json
import math
import os
import pathlib
import platform
import signal
import statistics
import subprocess
import sys
import time
import traceback
import types

REPO = pathlib.Path(__file__).resolve().parents[1]
import torch_bench_support  # noqa: E402 (bench/)
from torch_bench_support import commit_id, rotation_count  # noqa: E402
if os.environ.get("HAWK_TORCH_TEST_INSTALLED") != "1":  # else the installed wheel (run_wheel_check_on_gpu.sh)
    sys.path.insert(0, str(REPO / "examples" / "torch"))

DEFAULT_SHAPES = [(4, 2048, 2048, 16), (1, 8192, 2560, 10), (16, 1024, 1024, 16), (1, 65536, 2560, 10)]
QUICK_SHAPES = [(4, 2048, 2048, 16), (16, 1024, 1024, 16)]
DRY_RUN_SHAPES = [(2, 64, 32, 4), (1, 128, 48, 3)]
C = 8.0
MAX_SQRT_GRADIENT = 1000.0
GRAD_NAMES = ("dx", "da_param", "dWx", "dbx", "dWa", "dba")
IMPLEMENTATIONS = ("hawk", "hawk_gate_logits", "fla_chunk", "fla_fused_recurrent", "accelerated_scan_triton",
                   "recurrentgemma", "accelerated_scan_warp")
FLA_CHUNK_BLOCK = 128  # chunk_hgrn's chunk length (BT), fla-core 0.6.0
FLA_CHUNK_NOTE = (
    "its error is fla-core 0.6.0's chunk_hgrn's own, not its feeding: it gets the same fp32 (u, g = log a) "
    "[B, L, W] inputs as fla_fused_recurrent (error ~5e-3). Run serially (TRITON_INTERPRET=1 on a CPU) the same "
    "kernels match a float64 recurrence to 4e-7, forward and backward, and the chunked form in fp32 is exact (it "
    "multiplies the carry by exp(in-chunk cumsum of g), no division or subtraction of log sums). On the GPU the "
    "carry between its 128-step chunks (chunk_hgrn_fwd_kernel_o, and dx in chunk_hgrn_bwd_kernel_o) goes through "
    "global memory from one loop iteration to the next: the last row of chunk k, stored by one warp, is loaded by "
    "all 8 warps for chunk k+1, and the compiled kernel (sm_90, num_warps 8) has no barrier between them, so "
    "threads can read the carry before its correction. Emulating that stale carry on RecurrentGemma's gates (a "
    "near 1: exp of the chunk's log-gate sum stays far from 0) gives 0.2-0.5, the 0.30-0.34 seen on the H200; "
    "see scan_check in the JSON for the GPU-side evidence.")

torch = None  # imported in main(), so that --help runs anywhere
F = None
ON_CPU = False  # --dry-run: the timing path runs on the CPU (perf_counter, no graphs) to check the orchestration


def import_torch():
    global torch, F
    import torch as torch_module
    import torch.nn.functional as functional

    torch, F = torch_module, functional


# ---------------------------------------------------------------------------------------------------------------
# the composed layer: einsum projections, compiled gate math, a peer's scan
# ---------------------------------------------------------------------------------------------------------------


def block_diagonal(x, weight):
    """x [B, L, W] times the block-diagonal weight [H, w, w] ([block, in, out]); weights rounded to x's dtype
    (what bf16 autocast does), no bias. One batched cuBLAS GEMM."""
    heads, width = weight.shape[0], weight.shape[1]
    return torch.einsum("blhi,hij->blhj", x.unflatten(-1, (heads, width)), weight.to(x.dtype)).flatten(-2)


def sqrt_capped(z):
    """sqrt(z) whose derivative is capped at MAX_SQRT_GRADIENT (recurrentgemma's SqrtBoundDerivative; SPEC's
    sqrtgrad), written with detach so that torch.compile fuses it like any pointwise op."""
    value = torch.sqrt(z)
    slope = 0.5 * torch.rsqrt(torch.clamp(z, min=1.0 / (4.0 * MAX_SQRT_GRADIENT**2)))
    return value.detach() + (z - z.detach()) * slope.detach()


def gate_math(x, gx, ga, bx, ba, a_param, reset, log_space: bool, transpose: bool, dtype):
    """SPEC §1's gate math in fp32 from the projections (no bias yet): returns the scan's inputs (u, gate), gate =
    log a (log_space, FLA) or ā = a with 0 at resets (accelerated-scan), [B, L, W] or [B, W, L] (transpose)."""
    i = torch.sigmoid(gx.float() + bx)
    r = torch.sigmoid(ga.float() + ba)
    log_a = -C * r * F.softplus(a_param)
    a_square = torch.exp(2.0 * log_a)
    m = torch.where(reset, 1.0, sqrt_capped(1.0 - a_square))
    u = x.float() * i * m
    gate = log_a if log_space else torch.where(reset, 0.0, torch.exp(log_a))
    if transpose:
        return u.transpose(1, 2).contiguous().to(dtype), gate.transpose(1, 2).contiguous().to(dtype)
    return u.to(dtype), gate.to(dtype)


def transposed_output(y, dtype):
    """The scan's [B, W, L] states as y [B, L, W] in x's dtype, contiguous."""
    return y.transpose(1, 2).to(dtype).contiguous()


class Composer:
    """Builds the gate-math functions once (compiled unless told not to), shared by every composed row."""

    def __init__(self, compile_mode: str | None, scan_dtype):
        self.scan_dtype = scan_dtype
        self.compile_mode = compile_mode
        self.compile_note = "eager (--no-compile)" if compile_mode is None else "torch.compile(dynamic=True)"
        self.functions = {}

    def function(self, log_space: bool, transpose: bool):
        key = (log_space, transpose)
        if key not in self.functions:
            def fn(x, gx, ga, bx, ba, a_param, reset, _ls=log_space, _tr=transpose, _dt=self.scan_dtype):
                return gate_math(x, gx, ga, bx, ba, a_param, reset, _ls, _tr, _dt)

            self.functions[key] = self._compile(fn)
        return self.functions[key]

    def epilogue(self):
        if "epilogue" not in self.functions:
            self.functions["epilogue"] = self._compile(transposed_output)
        return self.functions["epilogue"]

    def _compile(self, fn):
        if self.compile_mode is None:
            return fn
        return torch.compile(fn, dynamic=True)

    def fall_back_to_eager(self, reason: str):
        """torch.compile failed: every composed row runs the same gate math eagerly from now on (and says so)."""
        self.compile_mode = None
        self.compile_note = f"eager (torch.compile failed: {reason})"
        self.functions = {}


def make_composed(composer: Composer, scan, log_space: bool, transpose: bool):
    """layer(x, params, reset) -> y: the einsum projections, the gate math, the scan, y in x's dtype."""

    def layer(x, params, reset):
        a_param, Wx, bx, Wa, ba = params
        gx = block_diagonal(x, Wx)
        ga = block_diagonal(x, Wa)
        u, gate = composer.function(log_space, transpose)(x, gx, ga, bx.flatten(), ba.flatten(), a_param, reset)
        h = scan(u, gate)
        if transpose:
            return composer.epilogue()(h, x.dtype)
        return h.to(x.dtype)

    return layer


# ---------------------------------------------------------------------------------------------------------------
# peers: loading (never raising), and their scans behind one calling convention scan(u, gate) -> h
# ---------------------------------------------------------------------------------------------------------------


def distribution_version(name):
    try:
        from importlib import metadata
        return metadata.version(name)
    except Exception:  # noqa: BLE001 - not installed, or no metadata
        return None


def import_without_package_init(module_name, packages, version=None):
    """Imports module_name with the packages in `packages` (outermost first) stood in by empty package modules (the
    outermost with __version__ = version), so that their __init__ files (which import far more than the module
    needs) do not run."""
    top = importlib.util.find_spec(packages[0])  # finds the package without running its __init__
    if top is None or not top.submodule_search_locations:
        raise ImportError(f"no package {packages[0]}")
    root = list(top.submodule_search_locations)[0]
    saved = {name: sys.modules.get(name) for name in packages}
    for name in packages:
        package = types.ModuleType(name)
        package.__path__ = [os.path.join(root, *name.split(".")[1:])]
        if name == packages[0] and version is not None:
            package.__version__ = version
        sys.modules[name] = package
    try:
        return importlib.import_module(module_name)
    except Exception:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        raise


def load_recurrentgemma_layers():
    """(recurrentgemma.torch.layers, how it was loaded). `import recurrentgemma.torch` first runs the package's
    __init__, which imports its JAX side (flax, jax); where that fails, the torch layers module is loaded alone (it
    needs torch, einops and jaxtyping)."""
    try:
        from recurrentgemma.torch import layers
        return layers, "recurrentgemma.torch"
    except ImportError as error:
        first_error = error
    try:
        layers = import_without_package_init("recurrentgemma.torch.layers", ["recurrentgemma", "recurrentgemma.torch"])
    except Exception as error:  # noqa: BLE001
        raise ImportError(f"{first_error}; and alone: {short_reason(error)}") from error
    return layers, f"recurrentgemma.torch.layers alone (the package's __init__ failed: {short_reason(first_error)})"


def load_fla_hgrn():
    """fla.ops.hgrn. `import fla` also imports FLA's layers and models (transformers); where that fails, fla.ops is
    loaded without fla's own __init__."""
    try:
        return importlib.import_module("fla.ops.hgrn")
    except ImportError as error:
        first_error = error
    try:
        return import_without_package_init("fla.ops.hgrn", ["fla"], distribution_version("fla-core") or "0")
    except Exception as error:  # noqa: BLE001
        raise ImportError(f"{first_error}; and without fla's __init__: {short_reason(error)}") from error


class Peers:
    """What is installed: each entry a callable, or the reason it is missing."""

    def __init__(self, dry_run: bool):
        self.available, self.missing, self.notes = {}, {}, {}
        self.warp_build = None
        self._load(dry_run)

    def _try(self, name, loader, install_hint):
        try:
            self.available[name] = loader()
        except Exception as error:  # noqa: BLE001 - a peer must never stop the benchmark
            message = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            self.missing[name] = f"{install_hint} is not usable here ({message[:300]})"

    def _load(self, dry_run):
        if dry_run:  # the peers' own pure-PyTorch references stand in for their GPU kernels, same conventions
            def fla_naive():
                load_fla_hgrn()
                from fla.ops.hgrn.naive import naive_recurrent_hgrn
                return lambda u, g: naive_recurrent_hgrn(u, g)[0]

            def accelerated_ref():
                from accelerated_scan.ref import scan
                return lambda u, a: scan(a, u)

            self._try("fla_chunk", fla_naive, "fla-core")
            self._try("fla_fused_recurrent", fla_naive, "fla-core")
            self._try("accelerated_scan_triton", accelerated_ref, "accelerated-scan")
        else:
            def fla_chunk():
                chunk_hgrn = load_fla_hgrn().chunk_hgrn
                return lambda u, g: chunk_hgrn(u, g)[0]

            def fla_fused():
                fused_recurrent_hgrn = load_fla_hgrn().fused_recurrent_hgrn
                return lambda u, g: fused_recurrent_hgrn(u, g)[0]

            def accelerated_triton():
                from accelerated_scan.scalar import scan
                return lambda u, a: scan(a, u)

            self._try("fla_chunk", fla_chunk, "fla-core")
            self._try("fla_fused_recurrent", fla_fused, "fla-core")
            self._try("accelerated_scan_triton", accelerated_triton, "accelerated-scan")
        self._try("recurrentgemma", lambda: load_recurrentgemma_layers(), "recurrentgemma (torch layer)")
        if "recurrentgemma" in self.available:
            self.available["recurrentgemma"], self.notes["recurrentgemma"] = self.available["recurrentgemma"]

    def start_warp_build(self, log_path):
        """Starts `import accelerated_scan.warp` (its nvcc build, cached by torch's cpp_extension) in a child
        process, so that it runs while the other rows are timed."""
        if importlib.util.find_spec("accelerated_scan") is None:
            self.missing["accelerated_scan_warp"] = "accelerated-scan is not installed"
            return
        self.warp_log = log_path
        with open(log_path, "w") as log:
            self.warp_build = subprocess.Popen([sys.executable, "-c", "import accelerated_scan.warp"],
                                               stdout=log, stderr=subprocess.STDOUT)
        self.warp_started = time.time()

    def warp_ready(self, wait_s: float):
        """The warp scan once its build has finished (waiting up to wait_s), or None; the reason goes to
        self.missing."""
        if "accelerated_scan_warp" in self.available:
            return self.available["accelerated_scan_warp"]
        if self.warp_build is None:
            self.missing.setdefault("accelerated_scan_warp", "its build was not started (--warp off)")
            return None
        try:
            self.warp_build.wait(timeout=max(0.0, wait_s))
        except subprocess.TimeoutExpired:
            self.missing["accelerated_scan_warp"] = (
                f"its nvcc build (import accelerated_scan.warp) was still running after "
                f"{time.time() - self.warp_started:.0f} s (log: {self.warp_log})")
            return None
        if self.warp_build.returncode != 0:
            tail = pathlib.Path(self.warp_log).read_text(errors="replace").strip().splitlines()[-3:]
            self.missing["accelerated_scan_warp"] = (f"import accelerated_scan.warp failed "
                                                     f"(rc {self.warp_build.returncode}): {' | '.join(tail)[:300]}")
            return None

        def accelerated_warp():
            from accelerated_scan.warp import scan
            return lambda u, a: scan(a, u)

        self.missing.pop("accelerated_scan_warp", None)
        self._try("accelerated_scan_warp", accelerated_warp, "accelerated-scan's warp scan")
        return self.available.get("accelerated_scan_warp")

    def stop_warp_build(self):
        if self.warp_build is not None and self.warp_build.poll() is None:
            self.warp_build.terminate()


def recurrentgemma_layer(layers, params, device):
    """recurrentgemma's torch RGLRU with hawk's parameters (fp32; its einsums run in bf16 under autocast)."""
    a_param, Wx, bx, Wa, ba = params
    heads, width = Wx.shape[0], Wx.shape[0] * Wx.shape[1]
    module = layers.RGLRU(width=width, num_heads=heads, device=device, dtype=torch.float32)
    with torch.no_grad():
        module.a_param.copy_(a_param)
        module.input_gate.w.copy_(Wx)
        module.input_gate.b.copy_(bx)
        module.a_gate.w.copy_(Wa)
        module.a_gate.b.copy_(ba)
    module_params = [module.a_param, module.input_gate.w, module.input_gate.b, module.a_gate.w, module.a_gate.b]

    def layer(x, _params, _reset, segment_pos):
        # no autocast cache: the casts happen inside the step, so that a CUDA graph captures them too
        with torch.autocast(device_type=x.device.type, dtype=torch.bfloat16, cache_enabled=False):
            y, _ = module(x, segment_pos, return_cache=False)
        return y.to(x.dtype)  # fp32 under autocast (its bias adds promote); bf16 like every other row

    return layer, module_params


# ---------------------------------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------------------------------


def event_ms(fn) -> float:
    if ON_CPU:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def time_calls(calls, budget_s: float, max_reps: int, min_reps: int = 3) -> dict:
    """Median ms per call: after warm-up, per repetition K calls back to back between two CUDA events, / K."""
    for call in calls:  # first calls: compilation, autotuning, allocator growth
        call()
    once = event_ms(calls[0])
    per_rep = 8 if once < 2.0 else 4 if once < 10.0 else 2 if once < 50.0 else 1
    if once < 50.0:
        for k in range(2 * per_rep):
            calls[k % len(calls)]()
    reps = int(max(min_reps, min(max_reps, budget_s * 1e3 / max(once * per_rep, 1e-3))))
    samples = []
    for r in range(reps):
        if ON_CPU:
            samples.append(event_ms(lambda: [calls[(r * per_rep + k) % len(calls)]() for k in range(per_rep)])
                           / per_rep)
            continue
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for k in range(per_rep):
            calls[(r * per_rep + k) % len(calls)]()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / per_rep)
    return dict(ms=statistics.median(samples), reps=reps, calls_per_rep=per_rep)


def capture_graph(step):
    """torch_bench_support.capture_graph with two warm-up calls; refused on the CPU (dry run)."""
    if ON_CPU:
        raise RuntimeError("no CUDA graphs on the CPU (dry run)")
    return torch_bench_support.capture_graph(step, warmups=2)


def short_reason(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def time_graph(steps, budget_s: float, max_reps: int) -> dict:
    """time_calls over graph replays (one graph per rotated input set); n/a with the reason if capture fails."""
    graphs = []
    try:
        for step in steps:
            graphs.append(capture_graph(step))
    except Exception as error:  # noqa: BLE001 - a capture that fails is a result, not a crash
        graphs.clear()
        with contextlib.suppress(Exception):
            torch.cuda.synchronize()
        free_memory()
        return dict(ms=None, na=short_reason(error))
    try:
        return time_calls([graph.replay for graph, _ in graphs], budget_s, max_reps)
    finally:
        graphs.clear()
        free_memory()


def free_memory():
    """torch_bench_support.free_memory, a no-op where there is no GPU (dry run)."""
    with contextlib.suppress(Exception):
        torch_bench_support.free_memory()


# ---------------------------------------------------------------------------------------------------------------
# accuracy
# ---------------------------------------------------------------------------------------------------------------


def max_relative_error(value, reference) -> float:
    """max |value - reference| / max |reference| over the tensor (fp32 arithmetic; NaN if either holds a NaN)."""
    value, reference = value.detach().float(), reference.detach().float()
    if value.shape != reference.shape:
        raise ValueError(f"shapes differ: {tuple(value.shape)} against {tuple(reference.shape)}")
    scale = reference.abs().max()
    difference = (value - reference).abs().max()
    if not (torch.isfinite(scale) and torch.isfinite(difference)):
        return float("nan")
    return float(difference / scale) if float(scale) > 0 else float(difference)


def chunked_scan_emulation(u, g, block=FLA_CHUNK_BLOCK, stale_carry=False):
    """h_t = exp(g_t) h_{t-1} + u_t ([B, L, W], h_{-1} = 0) in fp32 by chunk_hgrn's two-pass chunked form: each
    chunk's recurrence from 0 and the in-chunk cumulative sum c_t of g; then, chunk by chunk, h += exp(c_t) carry,
    carry = the previous chunk's corrected last state, or (stale_carry) its uncorrected one: what a thread reads
    when the correction of the previous chunk is not yet visible to it."""
    u, g = u.float(), g.float()
    local, cumsum = torch.empty_like(u), torch.empty_like(u)
    for start in range(0, u.shape[1], block):
        h = c = torch.zeros_like(u[:, 0])
        for t in range(start, min(u.shape[1], start + block)):
            h = torch.exp(g[:, t]) * h + u[:, t]
            c = c + g[:, t]
            local[:, t], cumsum[:, t] = h, c
    out = local.clone()
    for start in range(block, u.shape[1], block):
        carry = (local if stale_carry else out)[:, start - 1]
        out[:, start:start + block] += torch.exp(cumsum[:, start:start + block]) * carry[:, None]
    return out


def fla_chunk_scan_check(chunk_scan, fused_scan, u, g) -> dict:
    """chunk_hgrn against fused_recurrent_hgrn on the same scan inputs (fp32): the error over all of y, over the
    first chunk (no carry) and by position within the later chunks (quarters of FLA_CHUNK_BLOCK; the carry row is
    written by the warps of the last quarter), and whether two calls agree bitwise (a race need not)."""
    with torch.no_grad():
        first, second, reference = chunk_scan(u, g).float(), chunk_scan(u, g).float(), fused_scan(u, g).float()
    scale = float(reference.abs().max())
    error = (first - reference).abs()
    out = dict(vs_fused_recurrent=float(error.max()) / scale, repeat_bitwise_equal=bool(torch.equal(first, second)),
               first_chunk=float(error[:, :FLA_CHUNK_BLOCK].max()) / scale)
    L, quarter = u.shape[1], FLA_CHUNK_BLOCK // 4
    if L > FLA_CHUNK_BLOCK:
        position = torch.arange(FLA_CHUNK_BLOCK, L, device=u.device) % FLA_CHUNK_BLOCK
        later = error[:, FLA_CHUNK_BLOCK:]
        out["later_chunks_by_position"] = {
            f"{q * quarter}-{(q + 1) * quarter - 1}": float(later[:, (position // quarter) == q].max()) / scale
            for q in range(4)}
    return out


def errors_against(y, grads, reference_y, reference_grads) -> dict:
    out = {"y": max_relative_error(y, reference_y)}
    if grads is not None and reference_grads is not None:
        for name, g, r in zip(GRAD_NAMES, grads, reference_grads):
            out[name] = max_relative_error(g.reshape(r.shape), r)
        finite = [out[n] for n in GRAD_NAMES]
        out["grads_max"] = float("nan") if any(math.isnan(v) for v in finite) else max(finite)
    return out


# ---------------------------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------------------------


def fresh_generator(device):
    """A generator of its own for each shape's inputs: a peer whose CUDA-graph capture failed can leave the default
    CUDA generator in capture mode ("Offset increment outside graph capture"), which must not end the run."""
    gen = torch.Generator(device=device)
    gen.manual_seed(0)
    return gen


def make_parameters(W, H, device):
    gen = fresh_generator(device)
    """RecurrentGemma's initialisation (a on a ring of radius 0.9 ... 0.999; weights ~ N(0, 1/w)) with nonzero
    biases, fp32, requiring gradients."""
    w = W // H
    radius = torch.empty(W, device=device).uniform_(0.9, 0.999, generator=gen)
    a_param = torch.log(torch.expm1(-torch.log(radius)))
    Wx = torch.randn(H, w, w, device=device, generator=gen) / math.sqrt(w)
    Wa = torch.randn(H, w, w, device=device, generator=gen) / math.sqrt(w)
    bx = 0.1 * torch.randn(H, w, device=device, generator=gen)
    ba = 0.1 * torch.randn(H, w, device=device, generator=gen)
    return [p.requires_grad_(True) for p in (a_param, Wx, bx, Wa, ba)]


def make_inputs(B, L, W, H, device, sets):
    gen = fresh_generator(device)
    xs = [(torch.rand(B, L, W, device=device, generator=gen) * 2 - 1).to(torch.bfloat16).requires_grad_(True) for _ in range(sets)]
    dys = [(torch.rand(B, L, W, device=device, generator=gen) * 2 - 1).to(torch.bfloat16) for _ in range(sets)]
    reset = torch.zeros(B, L, 1, dtype=torch.bool, device=device)
    reset[:, 0] = True
    segment_pos = torch.arange(L, device=device, dtype=torch.int32).expand(B, L)
    return xs, dys, reset, segment_pos


# ---------------------------------------------------------------------------------------------------------------
# one shape
# ---------------------------------------------------------------------------------------------------------------


class Bench:
    def __init__(self, args, peers: Peers, composer: Composer, report: dict, started: float, device):
        self.args, self.peers, self.composer, self.report, self.started = args, peers, composer, report, started
        self.device = device
        self.hawk_torch = None
        self.hawk_missing = None

    def left_s(self) -> float:
        return self.args.deadline - (time.time() - self.started)

    def save(self):
        self.report["wall_s"] = round(time.time() - self.started, 1)
        if self.args.json:
            path = pathlib.Path(self.args.json)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(self.report, indent=2) + "\n")

    def layer_for(self, impl, params):
        """(layer(x, params, reset, segment_pos) -> y, the parameters it differentiates) or a reason string."""
        if impl == "hawk":
            if self.hawk_torch is None:
                return self.hawk_missing
            return (lambda x, p, reset, pos: self.hawk_torch.rglru(x, *p, validate=False)[0]), params
        if impl == "hawk_gate_logits":
            if self.hawk_torch is None:
                return self.hawk_missing

            def gate_logits(x, p, reset, pos):
                a_param, Wx, bx, Wa, ba = p
                gx = block_diagonal(x, Wx) + bx.flatten().to(x.dtype)
                ga = block_diagonal(x, Wa) + ba.flatten().to(x.dtype)
                return self.hawk_torch.rglru(x, a_param, gx=gx, ga=ga, validate=False)[0]

            return gate_logits, params
        if impl == "recurrentgemma":
            if impl not in self.peers.available:
                return self.peers.missing.get(impl, "not installed")
            return recurrentgemma_layer(self.peers.available[impl], params, self.device)
        scan = self.peers.available.get(impl)
        if scan is None:
            return self.peers.missing.get(impl, "not installed")
        log_space = impl.startswith("fla")
        layer = make_composed(self.composer, scan, log_space=log_space, transpose=not log_space)
        return (lambda x, p, reset, pos: layer(x, p, reset)), params

    def measure(self, shape, impls, state):
        """Rows of `impls` at `shape`; state carries the inputs and hawk's reference between calls."""
        B, L, W, H = shape
        a = self.args
        rows = []
        for impl in impls:
            row = dict(B=B, L=L, W=W, H=H, impl=impl, dtype="bf16", reset="sequence_start",
                       rotated_input_sets=state["rotated_input_sets"])
            if impl not in ("hawk", "hawk_gate_logits", "recurrentgemma"):
                row["gate_math"] = self.composer.compile_note
                row["scan_dtype"] = str(self.composer.scan_dtype).replace("torch.", "")
            if self.left_s() < 5:
                row["skipped"] = f"--deadline {a.deadline} s reached"
                rows.append(self.done(row))
                continue
            try:
                self._measure_one(row, impl, shape, state)
            except Exception as error:  # noqa: BLE001 - a row that fails is reported, the others go on
                row["error"] = short_reason(error)
                if a.verbose:
                    traceback.print_exc()
                free_memory()
            rows.append(self.done(row))
        return rows

    def done(self, row):
        self.report["rows"].append(row)
        self.save()
        print(json.dumps(row), flush=True)
        return row

    def _measure_one(self, row, impl, shape, state):
        B, L, W, H = shape
        a = self.args
        made = self.layer_for(impl, state["params"])
        if isinstance(made, str):
            row["skipped"] = made
            return
        layer, params = made
        xs, dys, reset, pos = state["xs"], state["dys"], state["reset"], state["pos"]
        long_sequence = L >= a.long_len
        budget = a.budget / 2 if long_sequence else a.budget
        max_reps = min(a.reps, a.long_reps) if long_sequence else a.reps
        run_backward = True
        if impl == "recurrentgemma":
            row["loaded_as"] = self.peers.notes.get("recurrentgemma")
            row["note"] = "its own einsums and eager gate math under bf16 autocast, Python loop over time"
            if L > a.rg_max_len:
                row["skipped"] = f"L > --rg-max-len {a.rg_max_len}: a launch per time step"
                return
            run_backward = L <= a.rg_backward_max_len
            if not run_backward:
                row["forward_backward_skipped"] = f"L > --rg-backward-max-len {a.rg_backward_max_len}"

        def forward(x):
            with torch.no_grad():
                return layer(x, params, reset, pos)

        def forward_backward(x, dy):
            y = layer(x, params, reset, pos)
            return torch.autograd.grad(y, [x, *params], dy)

        # accuracy first (it also compiles and autotunes): against hawk's y and gradients on input set 0
        y = forward(xs[0])
        grads = forward_backward(xs[0], dys[0]) if run_backward else None
        if impl == "hawk":
            state["ref_y"], state["ref_grads"] = y, grads
            row["note"] = "the reference of the errors"
        elif state.get("ref_y") is not None:
            row["max_rel_err_vs_hawk"] = errors_against(y, grads, state["ref_y"], state.get("ref_grads"))
        else:
            row["max_rel_err_vs_hawk"] = None
        del y, grads
        if impl == "fla_chunk":
            row["note"] = "error from fla-core's chunk_hgrn itself (its cross-chunk carry), not the feeding: footnote"
            fused = self.peers.available.get("fla_fused_recurrent")
            if fused is not None:
                try:
                    row["scan_check"] = fla_chunk_scan_check(self.peers.available[impl], fused,
                                                             *self.scan_inputs(state))
                except Exception as error:  # noqa: BLE001 - a diagnostic, never a failed row
                    row["scan_check"] = dict(error=short_reason(error))
                free_memory()
        graph_ok = not (impl == "recurrentgemma" and L > a.rg_graph_max_len)
        calls = [lambda x=x: forward(x) for x in xs]
        row["forward_eager"] = time_calls(calls, budget, max_reps)
        free_memory()
        row["forward_graph"] = (time_graph(calls, budget, max_reps) if graph_ok
                                else dict(ms=None, na=f"not attempted: L > --rg-graph-max-len {a.rg_graph_max_len}"))
        if run_backward:
            steps = [lambda x=x, dy=dy: forward_backward(x, dy) for x, dy in zip(xs, dys)]
            row["forward_backward_eager"] = time_calls(steps, budget, max_reps)
            free_memory()
            row["forward_backward_graph"] = (
                time_graph(steps, budget, max_reps) if graph_ok
                else dict(ms=None, na=f"not attempted: L > --rg-graph-max-len {a.rg_graph_max_len}"))
        free_memory()

    def scan_inputs(self, state):
        """The log-space scan inputs (u, g = log a) [B, L, W] that the FLA rows get for input set 0 (eager gate
        math: the same values as the compiled one)."""
        a_param, Wx, bx, Wa, ba = (p.detach() for p in state["params"])
        x = state["xs"][0].detach()
        with torch.no_grad():
            return gate_math(x, block_diagonal(x, Wx), block_diagonal(x, Wa), bx.flatten(), ba.flatten(), a_param,
                             state["reset"], True, False, self.composer.scan_dtype)

    def shape_state(self, shape, device):
        B, L, W, H = shape
        seed = int(os.environ.get("HAWK_BENCH_SEED", "20261130")) + B * 1_000_003 + L * 101 + W * 7 + H
        torch.manual_seed(seed)
        params = make_parameters(W, H, device)
        sets = 1 if device.type != "cuda" else rotation_count(2 * B * L * W * 2)
        xs, dys, reset, pos = make_inputs(B, L, W, H, device, sets)
        return dict(params=params, xs=xs, dys=dys, reset=reset, pos=pos, rotated_input_sets=sets)


# ---------------------------------------------------------------------------------------------------------------
# dry run (CPU): the gate-math composition against a float64 SPEC reference, and the error computation
# ---------------------------------------------------------------------------------------------------------------


def spec_reference(x, params, reset, gx=None, ga=None):
    """SPEC §1 literally, in float64, with autograd: the stand-in for hawk in --dry-run (fused mode, or gate-logits
    mode when gx, ga are given)."""
    B, L, W = x.shape
    xd = x.double()
    if gx is None:
        a_param, Wx, bx, Wa, ba = (p.double() for p in params)
        H, w = Wx.shape[0], Wx.shape[1]
        blocks = xd.reshape(B, L, H, w)
        gx = (torch.einsum("blhi,hij->blhj", blocks, Wx) + bx).reshape(B, L, W)
        ga = (torch.einsum("blhi,hij->blhj", blocks, Wa) + ba).reshape(B, L, W)
    else:
        a_param, gx, ga = params[0].double(), gx.double(), ga.double()
    i, r = torch.sigmoid(gx), torch.sigmoid(ga)
    log_a = -C * r * F.softplus(a_param)
    a, a2 = torch.exp(log_a), torch.exp(2 * log_a)

    class SqrtBound(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z):
            ctx.save_for_backward(z)
            return torch.sqrt(z)

        @staticmethod
        def backward(ctx, grad):
            (z,) = ctx.saved_tensors
            return grad / (2 * torch.sqrt(torch.clamp(z, min=1 / (4 * MAX_SQRT_GRADIENT**2))))

    rs = reset.reshape(B, L)
    h = torch.zeros(B, W, dtype=torch.float64)
    ys = []
    for t in range(L):
        if bool(rs[0, t]):  # dense canonical resets: the same column for every row
            h = xd[:, t] * i[:, t]
        else:
            h = a[:, t] * h + xd[:, t] * i[:, t] * SqrtBound.apply(1 - a2[:, t])
        ys.append(h)
    return torch.stack(ys, dim=1).to(x.dtype)


class SpecStandIn:
    """hawk_torch.rglru's calling convention over spec_reference (--dry-run's stand-in for hawk)."""

    __version__ = "float64 SPEC stand-in"

    @staticmethod
    def rglru(x, a_param, Wx=None, bx=None, Wa=None, ba=None, *, gx=None, ga=None, validate=True):
        reset = torch.zeros(x.shape[0], x.shape[1], 1, dtype=torch.bool)
        reset[:, 0] = True
        return spec_reference(x, [a_param, Wx, bx, Wa, ba], reset, gx, ga), None


def own_scan_blw(u, g):
    """Fallback stand-in for FLA's convention (h = exp(g) h + u, [B, L, W]) when fla-core is absent."""
    h = torch.zeros_like(u[:, 0], dtype=torch.float32)
    out = []
    for t in range(u.shape[1]):
        h = torch.exp(g[:, t].float()) * h + u[:, t].float()
        out.append(h)
    return torch.stack(out, dim=1).to(u.dtype)


def own_scan_bwl(u, a):
    """Fallback stand-in for accelerated-scan's convention (h = a h + u, [B, W, L])."""
    h = torch.zeros_like(u[..., 0], dtype=torch.float32)
    out = []
    for t in range(u.shape[-1]):
        h = a[..., t].float() * h + u[..., t].float()
        out.append(h)
    return torch.stack(out, dim=-1).to(u.dtype)


def dry_run(args, report, started):
    """CPU: builds inputs at tiny shapes, runs every composition (the peers' pure-PyTorch references where they
    are installed, else stand-ins with their conventions) and recurrentgemma's torch layer against a float64
    SPEC reference, through the same error computation; fails if an error is out of bounds."""
    device = torch.device("cpu")
    peers = Peers(dry_run=True)
    for impl, reason in peers.missing.items():
        print(f"note: {impl}: {reason}; a stand-in with its calling convention is used", flush=True)
    scans = {
        "fla_chunk": peers.available.get("fla_chunk", own_scan_blw),
        "accelerated_scan_triton": peers.available.get("accelerated_scan_triton", own_scan_bwl),
    }
    composer = Composer("default" if args.dry_run_compile else None, getattr(torch, args.scan_dtype))
    composer.compile_note = "torch.compile(dynamic=True) on the CPU" if args.dry_run_compile else "eager (dry run)"
    failures = []
    bounds = dict(y=3e-2, grads_max=8e-2)
    for shape in args.shapes:
        B, L, W, H = shape
        torch.manual_seed(1 + B + L + W + H)
        params = make_parameters(W, H, device)
        xs, dys, reset, pos = make_inputs(B, L, W, H, device, 1)
        x, dy = xs[0], dys[0]
        ref_y = spec_reference(x, params, reset)
        ref_grads = torch.autograd.grad(ref_y, [x, *params], dy)
        layers = {}
        for name, scan in scans.items():
            log_space = name.startswith("fla")
            label = (f"{name} ({'FLA naive_recurrent_hgrn' if log_space else 'accelerated_scan.ref.scan'})"
                     if name in peers.available else f"{name} (stand-in with its convention)")
            layers[label] = make_composed(composer, scan, log_space, not log_space)
        if "recurrentgemma" in peers.available:
            layers["recurrentgemma"], rg_params = recurrentgemma_layer(peers.available["recurrentgemma"], params,
                                                                       device)
        else:
            print(f"note: recurrentgemma: {peers.missing.get('recurrentgemma')}", flush=True)
        for label, layer in layers.items():
            row = dict(B=B, L=L, W=W, H=H, impl=label, device="cpu", reference="float64 SPEC (stand-in for hawk)")
            try:
                if label == "recurrentgemma":
                    y = layer(x, None, reset, pos)
                    grads = torch.autograd.grad(y, [x, *rg_params], dy)
                else:
                    y = layer(x, params, reset)
                    grads = torch.autograd.grad(y, [x, *params], dy)
                row["max_rel_err_vs_hawk"] = errors_against(y, grads, ref_y, ref_grads)
                for key, bound in bounds.items():
                    value = row["max_rel_err_vs_hawk"][key]
                    if not value <= bound:
                        failures.append(f"{label} at {shape}: {key} error {value:.3g} > {bound}")
            except Exception as error:  # noqa: BLE001
                row["error"] = short_reason(error)
                failures.append(f"{label} at {shape}: {row['error']}")
                traceback.print_exc()
            report["rows"].append(row)
            print(json.dumps(row), flush=True)
    # fla_chunk's GPU error is not the chunked form's arithmetic: chunk_hgrn's two passes emulated in fp32 on
    # RecurrentGemma's gates match a float64 recurrence; a stale carry between chunks gives the error seen on the GPU
    B, L, W, H = 1, 8 * FLA_CHUNK_BLOCK, 64, 4
    torch.manual_seed(2)
    params = make_parameters(W, H, device)
    xs, _, reset, _ = make_inputs(B, L, W, H, device, 1)
    scan_inputs = Bench(args, peers, composer, report, started, device).scan_inputs(
        dict(params=params, xs=xs, reset=reset))
    u, g = (v.float() for v in scan_inputs)
    h, states = torch.zeros(B, W, dtype=torch.float64), []
    for t in range(L):
        h = torch.exp(g[:, t].double()) * h + u[:, t].double()
        states.append(h)
    exact = torch.stack(states, dim=1)
    emulation = dict(
        shape=[B, L, W, H], chunk=FLA_CHUNK_BLOCK,
        exact_carry_fp32=max_relative_error(chunked_scan_emulation(u, g), exact),
        stale_carry_fp32=max_relative_error(chunked_scan_emulation(u, g, stale_carry=True), exact),
        largest_chunk_decay=float(torch.exp(g[:, :FLA_CHUNK_BLOCK].sum(1)).max()))
    check = fla_chunk_scan_check(own_scan_blw, own_scan_blw, u, g)  # the GPU-side check's code path, on the CPU
    report["fla_chunk_emulation"] = emulation
    print(f"fla_chunk's chunked form in fp32 (L = {L}, RecurrentGemma gates, a carry keeps up to "
          f"{emulation['largest_chunk_decay']:.2f} of itself over a chunk): exact carry "
          f"{emulation['exact_carry_fp32']:.1e}, stale carry {emulation['stale_carry_fp32']:.2f} (the H200 run: "
          f"0.30-0.34)", flush=True)
    if not emulation["exact_carry_fp32"] < 1e-5:
        failures.append(f"the chunked-form emulation (exact carry) is off: {emulation['exact_carry_fp32']:.3g}")
    if not emulation["stale_carry_fp32"] > 0.1:
        failures.append(f"the stale-carry emulation no longer shows a large error: {emulation['stale_carry_fp32']:.3g}")
    if check["vs_fused_recurrent"] != 0.0 or len(check["later_chunks_by_position"]) != 4:
        failures.append(f"fla_chunk_scan_check on one scan against itself: {check}")
    # the error computation itself
    a = torch.tensor([1.0, -2.0, 4.0])
    assert max_relative_error(a, a) == 0.0
    assert abs(max_relative_error(a + torch.tensor([0.0, 0.0, 0.4]), a) - 0.1) < 1e-6
    assert math.isnan(max_relative_error(torch.tensor([float("nan"), 0, 0]), a))
    report["dry_run_failures"] = failures
    report["wall_s"] = round(time.time() - started, 1)
    return failures


# ---------------------------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------------------------


def fmt_ms(entry):
    if not entry:
        return "—"
    if entry.get("ms") is None:
        return "n/a"
    return f"{entry['ms']:.3f}"


def fmt_err(value):
    if value is None:
        return "—"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return f"{value:.1e}"


def print_table(report):
    rows = report["rows"]
    print("\nRG-LRU layer, bf16, canonical resets; GPU ms, median (eager: K calls back to back / K; graph: replay); "
          "max relative error of y and of the gradients against hawk\n")
    print("| B, L, W, H | implementation | fwd eager | fwd graph | fwd+bwd eager | fwd+bwd graph | err y | err grads "
          "| note |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    notes = []
    for r in rows:
        shape = f"{r['B']}, {r['L']}, {r['W']}, {r['H']}"
        errors = r.get("max_rel_err_vs_hawk") or {}
        note = r.get("skipped") or r.get("error") or r.get("forward_backward_skipped") or (
            r.get("note", "") if r["impl"] in ("hawk", "fla_chunk") else "")
        check = r.get("scan_check") or {}
        if "vs_fused_recurrent" in check:
            note += (f" (vs fused_recurrent_hgrn on the same inputs: {fmt_err(check['vs_fused_recurrent'])}, first "
                     f"chunk {fmt_err(check['first_chunk'])}; repeat bitwise equal: {check['repeat_bitwise_equal']})")
        for key in ("forward_graph", "forward_backward_graph"):
            entry = r.get(key)
            if entry and entry.get("na"):
                notes.append(f"{shape} {r['impl']} {key.replace('_', ' ')}: n/a: {entry['na']}")
        print(f"| {shape} | {r['impl']} | {fmt_ms(r.get('forward_eager'))} | {fmt_ms(r.get('forward_graph'))} | "
              f"{fmt_ms(r.get('forward_backward_eager'))} | {fmt_ms(r.get('forward_backward_graph'))} | "
              f"{fmt_err(errors.get('y'))} | {fmt_err(errors.get('grads_max'))} | {note[:240]} |")
    if any(r["impl"] == "fla_chunk" and r.get("max_rel_err_vs_hawk") for r in rows):
        print(f"\n- fla_chunk: {FLA_CHUNK_NOTE}")
    for line in notes:
        print(f"- {line}")
    for name, reason in report.get("skipped_implementations", {}).items():
        print(f"- {name}: skipped: {reason}")


def parse_shape(text):
    values = tuple(int(v) for v in text.split(","))
    if len(values) != 4 or values[2] % values[3] != 0:
        raise argparse.ArgumentTypeError(f"a shape is B,L,W,H with H dividing W; got {text!r}")
    return values


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the results here (rewritten after every row)")
    parser.add_argument("--shapes", type=parse_shape, nargs="+", help="B,L,W,H ... (default: the four of issue 16)")
    parser.add_argument("--impls", nargs="+", choices=IMPLEMENTATIONS, help="a subset of the rows (default: all)")
    parser.add_argument("--reps", type=int, default=40, help="most repetitions per measurement")
    parser.add_argument("--budget", type=float, default=0.25, help="seconds of repetitions per measurement")
    parser.add_argument("--long-len", type=int, default=32768, help="from this L on, --long-reps and half budget")
    parser.add_argument("--long-reps", type=int, default=5, help="most repetitions per measurement at long L")
    parser.add_argument("--rg-max-len", type=int, default=8192, help="recurrentgemma's layer: forward up to this L")
    parser.add_argument("--rg-backward-max-len", type=int, default=2048,
                        help="recurrentgemma's layer: forward+backward up to this L")
    parser.add_argument("--rg-graph-max-len", type=int, default=2048,
                        help="recurrentgemma's layer: CUDA-graph capture (a node per step) up to this L")
    parser.add_argument("--scan-dtype", choices=("float32", "bfloat16"), default="float32",
                        help="dtype of the composed rows' scan inputs and outputs")
    parser.add_argument("--no-compile", action="store_true", help="the composed rows' gate math eager")
    parser.add_argument("--warp", choices=("auto", "off"), default="auto",
                        help="auto: build accelerated-scan's warp scan in the background and time it last")
    parser.add_argument("--deadline", type=float, default=225.0,
                        help="seconds from the start after which no new row starts (the JSON has what is done)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: two shapes (unless --shapes), few repetitions")
    parser.add_argument("--dry-run", action="store_true",
                        help="CPU only: tiny shapes; the compositions against a float64 SPEC reference; no timing")
    parser.add_argument("--dry-run-compile", action="store_true", help="with --dry-run: torch.compile on the CPU")
    parser.add_argument("--verbose", action="store_true", help="tracebacks of failed rows")
    args = parser.parse_args(argv)
    if args.quick:
        args.shapes = args.shapes or QUICK_SHAPES
        args.reps, args.budget = min(args.reps, 5), min(args.budget, 0.05)
        args.rg_backward_max_len = min(args.rg_backward_max_len, 1024)
    if args.dry_run:
        args.shapes = args.shapes or DRY_RUN_SHAPES
    args.shapes = args.shapes or DEFAULT_SHAPES
    impls = [i for i in IMPLEMENTATIONS if not args.impls or i in args.impls]

    started = time.time()
    import_torch()
    report = dict(
        benchmark="compare_peers",
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        commit=commit_id(),
        python=platform.python_version(),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        triton=distribution_version("triton"),
        versions={name: distribution_version(name) for name in ("fla-core", "accelerated-scan", "recurrentgemma",
                                                                  "hawk_torch", "einops", "jaxtyping")},
        shapes=[list(s) for s in args.shapes],
        settings={k: v for k, v in vars(args).items() if k not in ("json", "shapes")},
        timing=("CUDA events around K calls back to back (K = 8, 4, 2, 1 by call length) / K, median over "
                "repetitions after warm-up; graph: the same over CUDA-graph replays (one graph per rotated input "
                "set); inputs rotated beyond the 60 MB L2"),
        error=("max |a - b| / max |b| against hawk's y and gradients (dx, da_param, dWx, dbx, dWa, dba) on the same "
               "inputs"),
        rows=[],
    )
    if args.dry_run:
        global ON_CPU
        ON_CPU = True
        report["gpu"] = None
        failures = dry_run(args, report, started)
        print_table(report)
        accuracy_rows = report["rows"]
        # then the timing path itself on the CPU (perf_counter, graphs n/a), hawk stood in for by the SPEC
        report = dict(report, rows=[], dry_run_accuracy_rows=accuracy_rows)
        args.reps, args.budget, args.long_reps, args.warp = 3, 0.01, 2, "off"
        args.rg_max_len = args.rg_backward_max_len = args.rg_graph_max_len = 64
        args.shapes = args.shapes[:1] + [(1, 256, 32, 2)]
        peers = Peers(dry_run=True)
        peers.missing["accelerated_scan_warp"] = "needs CUDA"
        composer = Composer("default" if args.dry_run_compile else None, getattr(torch, args.scan_dtype))
        bench = Bench(args, peers, composer, report, started, torch.device("cpu"))
        bench.hawk_torch = SpecStandIn()
        report["versions"]["hawk_torch"] = SpecStandIn.__version__
        print("\nthe timing path on the CPU (times meaningless; hawk is the float64 SPEC stand-in):", flush=True)
        run_rows(bench, list(IMPLEMENTATIONS))
        rows = report["rows"]
        broken = [f"{r['impl']} at {r['B']},{r['L']},{r['W']},{r['H']}: {r['error']}" for r in rows if "error" in r]
        if not any(r["impl"] == "hawk" and r.get("forward_backward_eager") for r in rows):
            broken.append("no hawk (stand-in) row was timed")
        failures += broken
        report["dry_run_failures"] = failures
        bench.save()
        if failures:
            print("\nDRY RUN FAILED:\n  " + "\n  ".join(failures))
            return 1
        print(f"\ndry run passed: {len(accuracy_rows)} accuracy rows, {len(rows)} timed rows in {report['wall_s']} s")
        return 0

    if not torch.cuda.is_available():
        print("compare_peers.py needs a CUDA GPU (--dry-run checks the CPU-side parts)", file=sys.stderr)
        return 2
    report["gpu"] = torch.cuda.get_device_name()
    # `timeout` sends SIGTERM: exit through the finally clauses (the warp build's child process is stopped; the
    # JSON already holds every finished row)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(124))
    peers = Peers(dry_run=False)
    if args.warp == "auto" and "accelerated_scan_warp" in impls:
        log = pathlib.Path(args.json).with_suffix(".warp-build.log") if args.json else pathlib.Path(
            os.environ.get("TMPDIR", "/tmp")) / f"compare_peers-warp-build-{os.getpid()}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        peers.start_warp_build(str(log))
    elif "accelerated_scan_warp" in impls:
        peers.missing["accelerated_scan_warp"] = "--warp off"
    composer = Composer(None if args.no_compile else "default", getattr(torch, args.scan_dtype))
    bench = Bench(args, peers, composer, report, started, torch.device("cuda"))
    try:
        import hawk_torch
        bench.hawk_torch = hawk_torch
        report["versions"]["hawk_torch"] = hawk_torch.__version__
    except Exception as error:  # noqa: BLE001
        bench.hawk_missing = f"hawk_torch is not importable: {short_reason(error)}"
        print(f"warning: {bench.hawk_missing}; the peers are timed, errors need hawk", flush=True)
    if not args.no_compile:  # one tiny call: if inductor cannot run here, fall back to eager gate math
        try:
            probe = composer.function(True, False)
            z = torch.randn(1, 8, 16, device="cuda", dtype=torch.bfloat16)
            probe(z, z, z, torch.zeros(16, device="cuda"), torch.zeros(16, device="cuda"),
                  torch.zeros(16, device="cuda"), torch.zeros(1, 8, 1, dtype=torch.bool, device="cuda"))
        except Exception as error:  # noqa: BLE001
            print(f"warning: torch.compile failed ({short_reason(error)}); the gate math runs eagerly", flush=True)
            composer.fall_back_to_eager(short_reason(error))
    run_rows(bench, impls)
    return 0


def run_rows(bench, impls):
    """Every shape's rows (accelerated-scan's warp rows last, once its build is done), then the table."""
    args, peers, report = bench.args, bench.peers, bench.report
    report["gate_math"] = bench.composer.compile_note
    if "fla_chunk" in impls:
        report["notes"] = dict(fla_chunk=FLA_CHUNK_NOTE)
    for impl, reason in peers.missing.items():
        if impl in impls and impl != "accelerated_scan_warp":
            print(f"skipping {impl}: {reason}", flush=True)
    report["skipped_implementations"] = {k: v for k, v in peers.missing.items() if k in impls}
    now = [i for i in impls if i != "accelerated_scan_warp"]
    deferred = "accelerated_scan_warp" in impls
    try:
        for shape in args.shapes:
            print(f"(B, L, W, H) = {shape}", flush=True)
            state = bench.shape_state(shape, bench.device)
            state_impls = list(now)
            if deferred and peers.warp_ready(0) is not None:
                state_impls.append("accelerated_scan_warp")
            if "hawk" not in state_impls and bench.hawk_torch is not None:
                state_impls.insert(0, "hawk")  # the reference of the errors
            bench.measure(shape, state_impls, state)
            del state
            free_memory()
        pending = [s for s in args.shapes if deferred and not any(
            r["impl"] == "accelerated_scan_warp" and (r["B"], r["L"], r["W"], r["H"]) == s for r in report["rows"])]
        if pending:
            scan = peers.warp_ready(max(0.0, bench.left_s() - 30))
            for shape in pending:
                if scan is None:
                    bench.done(dict(B=shape[0], L=shape[1], W=shape[2], H=shape[3], impl="accelerated_scan_warp",
                                    skipped=peers.missing.get("accelerated_scan_warp", "unavailable")))
                    continue
                print(f"(B, L, W, H) = {shape}, accelerated-scan's warp scan", flush=True)
                state = bench.shape_state(shape, bench.device)
                if bench.hawk_torch is not None:  # hawk's reference again, untimed: the same seed, the same inputs
                    y = bench.hawk_torch.rglru(state["xs"][0], *state["params"], validate=False)[0]
                    state["ref_y"] = y
                    state["ref_grads"] = torch.autograd.grad(y, [state["xs"][0], *state["params"]], state["dys"][0])
                bench.measure(shape, ["accelerated_scan_warp"], state)
                del state
                free_memory()
    finally:
        peers.stop_warp_build()
    report["skipped_implementations"] = {k: v for k, v in peers.missing.items() if k in impls}
    bench.save()
    print_table(report)
    print(f"\n{'wrote ' + args.json + ' ' if args.json else ''}in {report['wall_s']} s")


if __name__ == "__main__":
    sys.exit(main())
