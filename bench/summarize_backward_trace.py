#!/usr/bin/env python3
"""One default RG-LRU backward call, launch by launch, from a trace of bench/probes/profile_rglru_backward.cu.

The driver runs one forward, then backward calls queued back to back, each with the one-pass workspace, so that
every backward call ends with its one `ordered_sum_kernel` and the trace splits into calls there (a backward in time
slices, which the driver never runs, launches one a slice and would be split into its slices). Printed (µs): the
forward's kernels; the last complete backward call's operations in start order, each with its duration and the gap
since the previous one ended (negative: it overlapped, as the programmatically dependent launches do); the median
span of a call (first start to last end) and the median period between successive calls' ends (what a loop of calls
pays per call). An ncu CSV has durations alone (kernels serialised: no starts, gaps or memsets); a time unit the table
below does not know stops the script rather than be guessed.

  summarize_backward_trace.py --nsys RUN_cuda_gpu_trace.csv [--title NAME]   (nsys stats -r cuda_gpu_trace -f csv)
  summarize_backward_trace.py --ncu RUN.csv [--title NAME]                   (ncu --metrics gpu__time_duration.sum --csv)
  summarize_backward_trace.py --ncu RUN.csv --calls N [--title NAME]         (a driver run of N backward calls in time
      slices, MODE fused_least: each kernel's launches and time per call, summed over its slices, and the share of
      the call; a sliced call has one ordered_sum_kernel a slice, so the trace cannot be split into calls there)

bench/trace-backward-kernels-on-gpu.sh runs it on the device.
"""
import argparse
import csv
import re
import statistics
import sys


def short_name(name):
    """`void hawk::rglru::backward_scan_kernel<...>(...)` -> `backward_scan_kernel`; memsets keep their label."""
    if name.startswith("["):
        return name.strip("[]").replace("CUDA ", "")
    name = re.sub(r"^void\s+", "", name)
    name = re.split(r"[<(]", name, maxsplit=1)[0]
    return name.split("::")[-1]


def column(header, prefix):
    for i, h in enumerate(header):
        if h.strip().startswith(prefix):
            return i
    raise SystemExit(f"no column starting with {prefix!r} in {header}")


def read_nsys(path):
    """[(start_ns, duration_ns, name)] in start order."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header_at = next(i for i, r in enumerate(rows) if r and r[0].strip().startswith("Start"))
    header = rows[header_at]
    cs, cd, cn = column(header, "Start"), column(header, "Duration"), column(header, "Name")
    ops = []
    for r in rows[header_at + 1:]:
        if len(r) <= max(cs, cd, cn) or not r[cs].strip():
            continue
        ops.append((float(r[cs]), float(r[cd]), short_name(r[cn])))
    return sorted(ops)


def read_ncu(path):
    """[(None, duration_ns, name)] in launch order (ncu serialises kernels: no starts, no gaps), without the driver's
    own buffer fills (Thrust's, through CUB): not hawk's, and one falls between the forward and the first backward."""
    scale = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    ops = []
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum" or "thrust::" in r["Kernel Name"]:
            continue
        value = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "")
        if unit not in scale:  # never guess a time's unit
            raise SystemExit(f"{path}: unknown unit {unit!r} for gpu__time_duration.sum")
        ops.append((None, value * scale[unit], short_name(r["Kernel Name"])))
    return ops


def split_calls(ops):
    """Groups of operations, each ending with an ordered_sum_kernel; the first holds the forward too."""
    calls, current = [], []
    for op in ops:
        current.append(op)
        if op[2] == "ordered_sum_kernel":
            calls.append(current)
            current = []
    return calls


def per_kernel(ops, calls):
    """Every backward kernel's launches and summed duration per call, over the operations after the forward."""
    first_backward = 1 + max(i for i, op in enumerate(ops) if "forward" in op[2])
    totals, launches, order = {}, {}, []
    for _, duration, name in ops[first_backward:]:
        if name not in totals:
            order.append(name)
            totals[name], launches[name] = 0.0, 0
        totals[name] += duration
        launches[name] += 1
    whole = sum(totals.values()) / calls
    print(f"  backward, per call (the mean of {calls}; launches and summed durations):")
    for name in order:
        if launches[name] % calls:
            raise SystemExit(f"{name}: {launches[name]} launches do not divide into {calls} calls")
        share = totals[name] / calls / whole
        print(f"  backward {name:<44} {launches[name] // calls:4d} x {totals[name] / calls / 1e3:9.1f} {share:6.1%}")
    print(f"  backward: sum of durations {whole / 1e3:.1f}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--nsys")
    g.add_argument("--ncu")
    p.add_argument("--title", default="")
    p.add_argument("--calls", type=int, default=0, help="backward calls in the run, for time slices (ncu only)")
    a = p.parse_args()
    if a.calls and a.nsys:
        p.error("--calls reads an ncu CSV")
    ops = read_nsys(a.nsys) if a.nsys else read_ncu(a.ncu)
    if a.calls:
        print(f"== {a.title} (ncu, clocks unlocked, kernels only; µs)")
        for _, duration, name in ops:
            if "forward" in name:
                print(f"  forward  {name:<44} {duration / 1e3:9.1f}")
        return per_kernel(ops, a.calls)
    calls = split_calls(ops)
    print(f"== {a.title} ({'nsys' if a.nsys else 'ncu, clocks unlocked, kernels only'}; µs)")
    if len(calls) < 2:
        print(f"fewer than two backward calls in the trace ({len(ops)} operations)")
        return 1
    forward = [op for op in calls[0] if "forward" in op[2]]
    for _, duration, name in forward:
        print(f"  forward  {name:<44} {duration / 1e3:9.1f}")
    last = calls[-1]
    print(f"  the last of {len(calls)} backward calls:")
    previous_end = None
    for start, duration, name in last:
        gap = "" if start is None or previous_end is None else f"{(start - previous_end) / 1e3:+9.1f}"
        print(f"  backward {name:<44} {duration / 1e3:9.1f} {gap:>9}")
        if start is not None:
            previous_end = max(previous_end or 0.0, start + duration)
    busy = sum(d for _, d, _ in last)
    print(f"  backward: sum of durations {busy / 1e3:.1f}")
    if a.nsys:
        later = calls[1:]
        spans = [max(s + d for s, d, _ in c) - c[0][0] for c in later]
        ends = [max(s + d for s, d, _ in c) for c in calls]
        periods = [e1 - e0 for e0, e1 in zip(ends[1:], ends[2:])] if len(ends) > 2 else []
        print(f"  backward: span of a call (median of {len(spans)}) {statistics.median(spans) / 1e3:.1f}", end="")
        if periods:
            print(f"; period between calls (median of {len(periods)}) {statistics.median(periods) / 1e3:.1f}")
        else:
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
