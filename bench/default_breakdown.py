#!/usr/bin/env python3
"""Where the default period's instructions over the floor go, on python.

Runs `PYTHONMALLOC=malloc python3 bench/workloads/churn.py 6` under callgrind
with no preload, with the one-jump floor (bench/tools/floor.c) and `--runs`
times with the shim at the default period (each run draws its own samples),
and prints, per shim run, the whole program over the floor and its parts:

- the fast paths: the self cost of the exported malloc, free, realloc and
  calloc over the floor's (exact: it repeats run to run);
- the sample events (`sample_event::on_countdown_expired`, inclusive), their
  walk (`backtrace::capture_with`) and the unwind rule cache's misses
  (`RuleStore::compute`), with their call counts;
- free's route (`routes::free_maybe_sampled`: frees the page filter sends,
  inclusive of the real free) and the sampled-free lookups in it;
- the exit dump (`lifecycle::at_exit`) and the library's constructor
  (`heapsample::on_load`).

Instruction counts do not depend on the load; nothing here is timed.

    python3 bench/default_breakdown.py [--runs 4] [--shim PATH]

Uses target/release/libheapsample.so unless `--shim`. Python 3.11 standard
library only; needs valgrind and gcc.
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
FAST = ("malloc", "free", "realloc", "calloc")
# (label, pattern of the function's full name in the profile)
PARTS = (
    ("sample events", r"sample_event::on_countdown_expired$"),
    ("  their walk", r"backtrace::capture_with$"),
    ("  rule cache misses", r"cache::RuleStore::compute$"),
    ("free's route", r"routes::free_maybe_sampled$"),
    ("  sampled-free lookups", r"sample_event::on_sampled_free$"),
    ("exit dump", r"lifecycle::at_exit$"),
    ("constructor", r"^heapsample::on_load$"),
)


def python_exe() -> str:
    if Path("/usr/bin/python3").exists():
        return str(Path("/usr/bin/python3").resolve())
    return str(Path(sys.executable).resolve())


def callgrind(out: Path, preload: dict[str, str]) -> int:
    """Run the workload under callgrind into `out`; its total instructions."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "PROF_CONF", "PYTHONMALLOC")}
    env["PYTHONMALLOC"] = "malloc"
    env.update(preload)
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
           python_exe(), str(BENCH / "workloads" / "churn.py"), "6"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    found = re.search(r"Collected : (\d+)", r.stderr)
    if r.returncode != 0 or not found:
        sys.exit(f"callgrind failed ({r.returncode}): {r.stderr[-600:]}")
    return int(found.group(1))


def self_costs(out: Path, library: str) -> int:
    """Self instructions of the exported fast paths of `library`."""
    text = subprocess.run(["callgrind_annotate", "--threshold=100", str(out)],
                          capture_output=True, text=True, check=True).stdout
    total = 0
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+\?\?\?:(\w+) \[(.*)\]\s*$", line)
        if m and m.group(2) in FAST and m.group(3) == library:
            total += int(m.group(1).replace(",", ""))
    return total


def inclusive_costs(out: Path) -> dict[str, tuple[int, int]]:
    """Per called function: (calls, inclusive instructions), summed over
    every call site (the `calls=` lines of the profile)."""
    names: dict[str, str] = {}
    calls: collections.Counter = collections.Counter()
    cost: collections.Counter = collections.Counter()
    callee, pending = None, False
    with open(out) as f:
        for line in f:
            if line.startswith(("cfn=", "fn=")):
                m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line.strip())
                if m.group(2):
                    names[m.group(1)] = m.group(2)
                if line.startswith("cfn="):
                    callee = m.group(1)
            elif line.startswith("calls="):
                calls[callee] += int(line.split("=")[1].split()[0])
                pending = True
            elif pending:
                fields = line.split()
                if len(fields) >= 2:
                    cost[callee] += int(fields[1])
                pending = False
    return {names.get(k, k): (calls[k], cost[k]) for k in calls}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--shim", default=str(ROOT / "target/release/libheapsample.so"))
    args = p.parse_args()
    shim = str(Path(args.shim).resolve())
    with tempfile.TemporaryDirectory(prefix="default-breakdown-") as tmp:
        tmp = Path(tmp)
        floor = tmp / "floor.so"
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(floor),
                        str(BENCH / "tools" / "floor.c"), "-ldl"], check=True)
        none = callgrind(tmp / "none.out", {})
        floor_total = callgrind(tmp / "floor.out", {"LD_PRELOAD": str(floor)})
        floor_fast = self_costs(tmp / "floor.out", str(floor))
        print(f"none {none:,}, floor {floor_total:,} "
              f"(+{(floor_total - none) / none:.2%}), floor's fast paths {floor_fast:,}")
        header = ["run", "over the floor", "fast paths"] + [label.strip() for label, _ in PARTS]
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for run in range(args.runs):
            out = tmp / f"shim{run}.out"
            total = callgrind(out, {"LD_PRELOAD": shim,
                                    "PROF_CONF": f"prof_prefix:{tmp / 'dump'}"})
            fast = self_costs(out, shim) - floor_fast
            found = inclusive_costs(out)
            cells = [str(run + 1), f"{total - floor_total:,} (+{(total - floor_total) / none:.2%})",
                     f"{fast:,}"]
            for _, pattern in PARTS:
                hits = [v for name, v in found.items() if re.search(pattern, name)]
                n, cost = (sum(h[0] for h in hits), sum(h[1] for h in hits))
                cells.append(f"{cost:,} ({n:,}×)" if hits else "–")
            print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
