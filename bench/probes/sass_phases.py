#!/usr/bin/env python3
"""Where a kernel's issued instructions and stall samples go, phase by phase, from Nsight Compute's source page.

    ncu -i REPORT.ncu-rep --page source --csv --print-source sass > k.csv
    bench/probes/sass_phases.py k.csv [--elements N] [--top 8]

The kernel's SASS is cut at every block-wide barrier (BAR.SYNC / BAR.RED), in address order: in hawk's scan
kernels the regions are their phases (the ticket and the loads, the gates, the two recurrences, the gradients,
the d a_param row). For each region: the warp-level instructions executed, their share, the stall samples and
their share, the instructions per element (with --elements, the elements the profiled launch covered, e.g.
T * W) and the opcodes that executed most. Subroutines after the kernel's last EXIT (slow paths of the IEEE
square root and division) form their own region. A CSV holding several kernels (one report of several launches)
is cut where the addresses start again from 0, and each kernel is printed on its own.

Columns are found by name: the address ("Address"), the instruction ("Source"), the warp-level executions
("Instructions Executed", not the thread-level or predicated-on counts) and the samples ("Warp Stall Sampling
(All Samples)"); a missing column prints as zero.
"""

import argparse
import collections
import csv
import gzip
import re
import sys


def open_text(path):
    return gzip.open(path, "rt", newline="") if path.endswith(".gz") else open(path, newline="")


def find_column(header, *wanted, avoid=()):
    for i, name in enumerate(header):
        low = name.lower()
        if all(w in low for w in wanted) and not any(a in low for a in avoid):
            return i
    return None


def number(text):
    text = (text or "").replace(",", "").strip()
    try:
        return float(text)
    except ValueError:
        return 0.0


def read_kernels(path):
    """Lists of (address, instruction, executed, samples), one list per kernel in the file."""
    with open_text(path) as f:
        rows = list(csv.reader(f))
    start = next((i for i, r in enumerate(rows) if any(c.strip() == "Source" for c in r)), None)
    if start is None:
        sys.exit(f"{path}: no header row with a 'Source' column")
    header = rows[start]
    col_addr = find_column(header, "address")
    col_src = header.index(next(c for c in header if c.strip() == "Source"))
    col_exec = find_column(header, "instructions executed", avoid=("thread", "predicated", "not pred"))
    col_samples = find_column(header, "warp stall sampling", "all")
    kernels, current, last_addr = [], [], -1
    for r in rows[start + 1:]:
        if len(r) <= col_src or not r[col_src].strip():
            continue
        addr = int(r[col_addr], 16) if col_addr is not None and r[col_addr].strip() else last_addr + 16
        if addr <= last_addr and current:  # a new kernel's listing starts
            kernels.append(current)
            current = []
        last_addr = addr
        executed = number(r[col_exec]) if col_exec is not None else 0.0
        samples = number(r[col_samples]) if col_samples is not None else 0.0
        current.append((addr, r[col_src].strip(), executed, samples))
    if current:
        kernels.append(current)
    return kernels


def opcode(instruction):
    m = re.match(r"(@!?U?P\w+\s+)?([A-Z0-9_]+)", instruction)
    return m.group(2) if m else "?"


def regions(listing):
    """Cut after block-wide barriers, and after the last EXIT (the subroutines follow it)."""
    last_exit = max((i for i, (_, ins, _, _) in enumerate(listing) if opcode(ins) == "EXIT"), default=len(listing) - 1)
    cuts, current = [], []
    for i, entry in enumerate(listing):
        current.append(entry)
        if re.search(r"\bBAR\.(SYNC|RED)\b", entry[1]) or i == last_exit:
            cuts.append(current)
            current = []
    if current:
        cuts.append(current)
    return cuts


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", help="ncu --page source --csv --print-source sass output (.csv or .csv.gz)")
    parser.add_argument("--elements", type=float, default=0, help="elements the launch covered (T * W)")
    parser.add_argument("--top", type=int, default=8, help="opcodes listed per region")
    args = parser.parse_args()
    for k, listing in enumerate(read_kernels(args.csv)):
        cuts = regions(listing)
        total = sum(e for _, _, e, _ in listing) or 1.0
        samples = sum(s for _, _, _, s in listing) or 1.0
        print(f"kernel {k}: {len(listing)} instructions, {total:,.0f} warp instructions executed, "
              f"{samples:,.0f} stall samples" + (f", {total / args.elements:.3f} a element" if args.elements else ""))
        for n, region in enumerate(cuts):
            executed = sum(e for _, _, e, _ in region)
            sampled = sum(s for _, _, _, s in region)
            ops = collections.Counter()
            for _, ins, e, _ in region:
                ops[opcode(ins)] += e
            top = " ".join(f"{op} {count / executed:.0%}" for op, count in ops.most_common(args.top)) if executed else ""
            per_element = f" {executed / args.elements:7.3f}/el" if args.elements else ""
            print(f"  region {n:2d} {region[0][0]:#07x}-{region[-1][0]:#07x} {len(region):5d} instr "
                  f"executed {executed:14,.0f} {executed / total:6.1%}{per_element}  "
                  f"samples {sampled / samples:6.1%}  {top}")


if __name__ == "__main__":
    main()
