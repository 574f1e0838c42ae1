#!/usr/bin/env python3
"""Medians of bench_rglru runs grouped by label, one table: what a merge round's A/B among trees needs.

Each JSON file's label is the part of its name before `_run` (bench_rglru_<label>_run<k>.json, the names
bench/run-bench-variants-on-gpu.sh writes; a name without `_run` is its own label). For every bf16 canonical row
(fused and gate-logits) it prints the median over a label's runs of each run's median: forward+backward, the
backward alone through each scan kernel, and the least-workspace forward+backward where the row has them. Where a
run's GPU clocks were logged beside its JSON (<name>.clocks.csv, with_clock_log in bench/device_call.sh), a last row
gives the median SM clock over each label's samples.

    bench/summarize_bench_variants.py DIR_OR_JSON...  [--restricted]
"""
import glob
import json
import os
import re
import statistics
import sys

PHASES = (
    ("forward_backward", "fwd+bwd"),
    ("backward_sequential_scan", "bwd alone, sequential scan"),
    ("backward_chunked_scan", "bwd alone, chunked scan"),
    ("forward_backward_min_workspace", "fwd+bwd, least workspace"),
    ("forward_backward_half_workspace", "fwd+bwd, half workspace"),
)


def label_of(path):
    name = os.path.basename(path)
    name = re.sub(r"\.json$", "", name)
    name = re.sub(r"^bench_rglru_?", "", name) or "bench_rglru"
    return re.sub(r"_run\d+$", "", name)


def clock_samples(json_path):
    """The SM clock samples (MHz) of the run whose JSON is json_path, from nvidia-smi's CSV beside it, if any
    (X.clocks.csv as run-bench-variants-on-gpu.sh names it, X_clocks.csv as the merge round does)."""
    path = next((p for p in (re.sub(r"\.json$", suffix, json_path) for suffix in (".clocks.csv", "_clocks.csv"))
                 if os.path.exists(p)), None)
    if path is None:
        return []
    samples = []
    with open(path) as f:
        header = f.readline().split(",")
        column = next((i for i, h in enumerate(header) if h.strip().startswith("clocks.current.sm")), None)
        if column is None:
            return []
        for line in f:
            fields = line.split(",")
            if len(fields) > column and fields[column].strip().endswith("MHz"):
                samples.append(float(fields[column].split()[0]))
    return samples


def main(argv):
    unknown = [a for a in argv if a.startswith("--") and a != "--restricted"]
    if unknown or not [a for a in argv if not a.startswith("--")]:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    implementation = "hawk_restricted" if "--restricted" in argv else "hawk_canonical"
    paths = []
    for arg in (a for a in argv if not a.startswith("--")):
        paths += sorted(glob.glob(os.path.join(arg, "bench_rglru*.json"))) if os.path.isdir(arg) else [arg]
    table = {}  # (mode, shape, phase) -> label -> [us]
    labels = []
    clocks = {}  # label -> [MHz]
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        if "rows" not in doc:
            continue
        label = label_of(path)
        if label not in labels:
            labels.append(label)
        clocks.setdefault(label, []).extend(clock_samples(path))
        for row in doc["rows"]:
            if row.get("implementation") != implementation or row.get("dtype") != "bf16":
                continue
            s = row["shape"]
            shape = "(%d, %d, %d, %d)" % (s["batch"], s["length"], s["width"], s["heads"])
            for key, name in PHASES:
                if isinstance(row.get(key), dict) and "median_ms" in row[key]:
                    cell = table.setdefault((row["mode"], shape, name), {})
                    cell.setdefault(label, []).append(row[key]["median_ms"] * 1e3)
    if not table:
        print("no bench_rglru rows found", file=sys.stderr)
        return 1
    print("us, bf16, %s; the median over each label's runs of their medians (runs in brackets)" % implementation)
    print("| mode, shape, what | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for (mode, shape, name), cell in table.items():
        values = []
        for label in labels:
            runs = cell.get(label, [])
            values.append("%.1f [%d]" % (statistics.median(runs), len(runs)) if runs else "—")
        print("| %s %s, %s | %s |" % (mode, shape, name, " | ".join(values)))
    if any(clocks.values()):
        values = ["%.0f [%d samples]" % (statistics.median(clocks[l]), len(clocks[l])) if clocks.get(l) else "—"
                  for l in labels]
        print("| SM clock during the runs, MHz (median) | %s |" % " | ".join(values))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
