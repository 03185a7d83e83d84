#!/usr/bin/env python3
"""The extra cost of a sample whose walk steps through generated code.

`workloads/jit_walk.c` makes N allocations 8 calls deep, through 8 stubs
generated into an anonymous executable mapping (no unwind tables: the walk
steps by the frame pointer) or through 8 compiled functions of the same
shape (CFI). Under callgrind, with the shim at `lg_prof_sample:0` (every
allocation sampled) and without it, at two N: the slope between them is the
cost per allocation, constant costs (start, exit dump) cancelled. Printed:
the shim's instructions per sampled allocation for each chain, and the
difference per sample and per generated frame. Instruction counts repeat
run to run: one run each.

    cargo build --release -p heapsample-shim
    python3 bench/jit_walk.py [--shim PATH] [--n 10000]
"""
import argparse
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEPTH = 8


def instructions(argv, env):
    with tempfile.TemporaryDirectory() as scratch:
        out = pathlib.Path(scratch) / "callgrind.out"
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv],
            env=env, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"{' '.join(argv)} under callgrind failed: {run.stderr[-2000:]}")
        found = re.search(r"I\s+refs:\s+([\d,]+)", run.stderr)
        return int(found.group(1).replace(",", ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shim", default=str(ROOT / "target/release/libheapsample.so"))
    parser.add_argument("--n", type=int, default=10000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        binary = pathlib.Path(work) / "jit_walk"
        subprocess.run(["gcc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(binary),
                        str(ROOT / "bench/workloads/jit_walk.c")], check=True)
        dumps = pathlib.Path(work) / "dumps"
        dumps.mkdir()
        profiled = {"LD_PRELOAD": args.shim,
                    "PROF_CONF": f"lg_prof_sample:0,prof_prefix:{dumps}/d",
                    "PATH": "/usr/bin:/bin"}
        plain = {"PATH": "/usr/bin:/bin"}
        per = {}
        for chain in ("jit", "native"):
            cost = {}
            for name, env in (("shim", profiled), ("plain", plain)):
                small = instructions([str(binary), chain, str(args.n)], env)
                large = instructions([str(binary), chain, str(2 * args.n)], env)
                cost[name] = (large - small) / args.n
            per[chain] = cost["shim"] - cost["plain"]
            print(f"{chain:6}: {per[chain]:8.0f} instructions of the shim per sampled "
                  f"allocation ({DEPTH} frames of {'generated code' if chain == 'jit' else 'compiled code with CFI'})")
        extra = per["jit"] - per["native"]
        print(f"extra : {extra:8.0f} per sample through {DEPTH} generated frames, "
              f"{extra / DEPTH:.0f} per generated frame")


if __name__ == "__main__":
    main()
