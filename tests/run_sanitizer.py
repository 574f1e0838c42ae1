#!/usr/bin/env python3
"""Run GPU suites under compute-sanitizer, one Catch2 test case per process, several processes at a time.

A whole suite under racecheck runs for far longer than the suite itself; split by test case, the processes
share the GPU and the machine's cores, and a failure names its test case. HAWK_SANITIZE=1 is set, which lets
the suites skip their longest sizes (see tests/gpu/*/..._support.cuh).

    tests/run_sanitizer.py --tool memcheck --tool racecheck --jobs 8 --logs OUTDIR [--gpus 0,1] [--program EXAMPLE ...] SUITE ...

--gpus spreads the processes over several GPUs (CUDA_VISIBLE_DEVICES, the least busy GPU first); with
--gpus-file F the GPUs are read from F (comma-separated) before each process starts, so a script can hand over a
GPU once its other work there is done. Racecheck runs, the longest, are started first.

--skip-clean LOG skips the (tool, suite, test case) runs that an earlier run's log reports clean, so that a long
sanitizer pass can be split over several sessions on the GPU machine.

Exit status 0 when every test case ran clean under every tool, 1 otherwise.
"""

import argparse
import concurrent.futures
import os
import pathlib
import re
import shlex
import subprocess
import sys
import threading
import time


def test_names(exe):
    listing = subprocess.run([exe, "--list-test-names-only"], capture_output=True, text=True).stdout  # exit code = count
    # The suites print a "GPU: ..." banner first; Catch2 indents wrapped names, which --list-test-names-only
    # does not do, so every other non-empty line is a name.
    return [line for line in listing.splitlines() if line.strip() and not line.startswith("GPU:")]


def catch_spec(name):
    """A Catch2 v2 test spec matching exactly `name`: escape its special characters."""
    return re.sub(r"([\\,\[\]*~\"])", r"\\\1", name)


class GpuPicker:
    """Hands each process the GPU with the fewest processes running on it (None: leave the environment alone)."""

    def __init__(self, gpus, gpus_file=None):
        self.running = {gpu: 0 for gpu in gpus}
        self.gpus_file = gpus_file
        self.lock = threading.Lock()

    def allowed(self):
        if self.gpus_file is None:
            return list(self.running)
        try:
            listed = [gpu.strip() for gpu in pathlib.Path(self.gpus_file).read_text().split(",") if gpu.strip()]
        except OSError:
            listed = []
        for gpu in listed:
            self.running.setdefault(gpu, 0)
        return listed or list(self.running)

    def take(self):
        with self.lock:
            allowed = self.allowed()
            if not allowed:
                return None
            gpu = min(allowed, key=self.running.get)
            self.running[gpu] += 1
            return gpu

    def give(self, gpu):
        if gpu is not None:
            with self.lock:
                self.running[gpu] -= 1


def run_one(tool, exe, name, logs, timeout, gpus):
    """One (tool, executable, test case) run; name None runs a whole program that is not a Catch2 suite."""
    started = time.time()
    command = ["compute-sanitizer", "--tool", tool, "--error-exitcode", "9"]
    if name is not None:
        command += [exe, catch_spec(name)]
    else:
        command += shlex.split(exe)  # a program may come with its arguments
    env = dict(os.environ, HAWK_SANITIZE="1")
    gpu = gpus.take()
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    try:
        done = subprocess.run(command, capture_output=True, text=True, errors="replace", env=env, timeout=timeout)
        output, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as expired:
        output, code = (expired.stdout or b"").decode(errors="replace") + "\nTIMEOUT\n", -1
    finally:
        gpus.give(gpu)
    ran = name is None or re.search(r"All tests passed \((\d+) assertion", output) or \
        re.search(r"test cases: +(\d+)", output)
    summary = "RACECHECK SUMMARY: 0 hazards" if tool == "racecheck" else "ERROR SUMMARY: 0 errors"
    # Clean: the test case ran and passed (a spec that matched nothing must not pass silently), or the program
    # exited 0, and the tool reported nothing, warnings included.
    clean = code == 0 and bool(ran) and summary in output
    name = name if name is not None else "(whole program)"
    if not clean:
        stem = re.sub(r"[^A-Za-z0-9]+", "_", f"{tool}_{pathlib.Path(exe).name}_{name}")[:120]
        (pathlib.Path(logs) / f"{stem}.log").write_text(output)
    return tool, pathlib.Path(exe).name, name, clean, code, time.time() - started, output[-1500:]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tool", action="append", required=True, choices=["memcheck", "racecheck", "synccheck",
                                                                           "initcheck"])
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--gpus", default="", help="comma-separated GPU indices to spread the processes over")
    parser.add_argument("--gpus-file", default=None, help="a file listing the GPUs to use, read before each process")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per test case and tool")
    parser.add_argument("--logs", required=True, help="folder for the logs of failing test cases")
    parser.add_argument("--skip-clean", action="append", default=[], metavar="LOG",
                        help="skip what this earlier log of the script reports clean")
    parser.add_argument("--program", action="append", default=[], metavar="EXE",
                        help="also run EXE (with its arguments, quoted as one), a program that is not a Catch2 suite, whole")
    parser.add_argument("--filter", default=None, metavar="REGEX",
                        help="only the test cases whose name matches REGEX (Python re.search)")
    parser.add_argument("executables", nargs="*", help="Catch2 suites, run one test case per process")
    args = parser.parse_args()
    pathlib.Path(args.logs).mkdir(parents=True, exist_ok=True)

    done_before = set()
    for log in args.skip_clean:
        for line in pathlib.Path(log).read_text().splitlines():
            match = re.match(r"^clean\s+(\S+)\s+(\S+)\s+[\d.]+ s  (.*)$", line)
            if match:
                done_before.add(match.groups())
    cases = [(exe, name) for exe in args.executables for name in test_names(exe)
             if args.filter is None or re.search(args.filter, name)] + \
        [(exe, None) for exe in args.program]
    work = [(tool, exe, name) for exe, name in cases for tool in args.tool
            if (tool, pathlib.Path(exe).name, name if name is not None else "(whole program)") not in done_before]
    work.sort(key=lambda item: item[0] != "racecheck")  # stable: racecheck (the slow tool) first, else in order
    gpus = GpuPicker([gpu for gpu in args.gpus.split(",") if gpu], args.gpus_file)
    if done_before:
        print(f"{len(done_before)} runs reported clean before are skipped", flush=True)
    print(f"{len(work)} (tool, test case) runs, {args.jobs} at a time", flush=True)
    failures = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_one, tool, exe, name, args.logs, args.timeout, gpus) for tool, exe, name in work]
        for future in concurrent.futures.as_completed(futures):
            tool, exe, name, clean, code, seconds, tail = future.result()
            print(f"{'clean ' if clean else 'FAILED'} {tool:9} {exe} {seconds:6.1f} s  {name}", flush=True)
            if not clean:
                failures += 1
                print(tail, flush=True)
    print(f"sanitizer: {len(work) - failures} of {len(work)} clean", flush=True)
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
