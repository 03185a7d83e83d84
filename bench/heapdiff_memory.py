#!/usr/bin/env python3
"""heapdiff's peak memory and time per view on a large dump.

    python3 bench/heapdiff_memory.py                 # 3 rounds, 50,000 stacks
    python3 bench/heapdiff_memory.py --rounds 1 --stacks 5000    # quick
    python3 bench/heapdiff_memory.py --heapdiff OTHER/heapdiff   # another build, same dumps, rounds interleaved

A real program runs under the shim at lg_prof_sample:0
(bench/workloads/serve_stacks.c): one live block at each of --stacks
distinct stacks (binary recursion 16 calls deep, about 37 frames a stack),
one exit dump; a second run with 80 % of the stacks is the base of the
comparisons. Then every view of `heapdiff` reads the dump, each run on its
own, measured by wait4: wall time and the child's peak RSS (ru_maxrss),
given as a multiple of the dump's size; the json report's bytes per stack.
Medians with min-max over the rounds; the machine's load before and after
is printed (the machine is shared: wall-clock numbers are noisy, peak RSS
is not). Targets: peak RSS <= 3x the dump for text, pprof, lifetimes, ages
and leaks; json <= 1 KB per stack; `--base` svg under 1.5 s.
Results: bench/out/heapdiff_memory.json. Python 3.11 standard library only.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
OUT = BENCH / "out"
SHIM = ROOT / "target" / "release" / "libheapsample.so"
HEAPDIFF = ROOT / "target" / "release" / "heapdiff"

# (name, arguments before the dump, uses the base)
VIEWS = [
    ("text", ["-f", "text"], False),
    ("pprof", ["-f", "pprof"], False),
    ("folded", ["-f", "folded"], False),
    ("svg", ["-f", "svg"], False),
    ("json", ["-f", "json"], False),
    ("html", ["-f", "html"], False),
    ("lifetimes", ["lifetimes"], False),
    ("ages", ["ages"], False),
    ("leaks", ["leaks"], False),
    ("base text", ["-f", "text"], True),
    ("base svg", ["-f", "svg"], True),
    ("base json", ["-f", "json"], True),
]
RSS_TARGET = {"text": 3.0, "pprof": 3.0, "lifetimes": 3.0, "ages": 3.0, "leaks": 3.0}


def make_dump(work: Path, leaves: int, name: str) -> Path:
    binary = work / "serve_stacks"
    if not binary.exists():
        subprocess.run(["gcc", "-O1", "-g", "-fno-optimize-sibling-calls",
                        str(BENCH / "workloads" / "serve_stacks.c"), "-o", str(binary), "-ldl"],
                       check=True)
    directory = work / name
    directory.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, LD_PRELOAD=str(SHIM),
               PROF_CONF=f"lg_prof_sample:0,prof_prefix:{directory}/hs")
    subprocess.run([str(binary), "16", str(leaves)], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    (dump,) = directory.glob("hs.*.prof")
    return dump


def measure(heapdiff: Path, args: list[str], output: Path) -> tuple[float, int]:
    """Wall seconds and peak RSS in bytes of one heapdiff run."""
    command = [str(heapdiff), *args]
    if args[0] in ("lifetimes", "ages", "leaks"):
        stdout = open(output, "wb")
    else:
        command[1:1] = ["-q", "-o", str(output)]
        stdout = subprocess.DEVNULL
    started = time.monotonic()
    child = subprocess.Popen(command, stdout=stdout, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    stderr = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    if stdout is not subprocess.DEVNULL:
        stdout.close()
    if child.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({child.returncode}): {stderr}")
    return wall, usage.ru_maxrss * 1024


def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stacks", type=int, default=50_000)
    parser.add_argument("--views", default=",".join(v[0] for v in VIEWS),
                        help="comma-separated views to measure (default: all)")
    parser.add_argument("--heapdiff", type=Path, action="append", default=[],
                        help="another heapdiff build to measure beside this tree's (repeatable)")
    args = parser.parse_args()
    builds = [HEAPDIFF, *args.heapdiff]
    for need in (SHIM, *builds):
        if not need.exists():
            sys.exit(f"{need} missing: cargo build --release -p heapsample-shim -p heapdiff-cli")
    work = OUT / f"heapdiff-memory-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    new = make_dump(work, args.stacks, "new")
    base = make_dump(work, args.stacks * 4 // 5, "base")
    dump_bytes = new.stat().st_size
    wanted = set(args.views.split(","))
    views = [v for v in VIEWS if v[0] in wanted]
    print(f"dump: {dump_bytes} bytes ({dump_bytes / 2**20:.1f} MiB), {args.stacks} stacks; "
          f"base {base.stat().st_size} bytes; load before {load()}")
    results = {str(b): {v[0]: {"wall_s": [], "rss_bytes": [], "output_bytes": 0} for v in views}
               for b in builds}
    for _ in range(args.rounds):
        for name, view_args, with_base in views:
            for build in builds:
                output = work / f"out.{name.replace(' ', '-')}"
                command = [*view_args] + (["--base", str(base)] if with_base else []) + [str(new)]
                wall, rss = measure(build, command, output)
                m = results[str(build)][name]
                m["wall_s"].append(wall)
                m["rss_bytes"].append(rss)
                m["output_bytes"] = output.stat().st_size
                output.unlink()
    print(f"load after {load()}")
    for build in builds:
        print(f"\n{build}")
        print(f"{'view':<11} {'wall s (min-max)':>20} {'peak RSS MiB (min-max)':>24} "
              f"{'x dump':>7} {'output B/stack':>15}")
        for name, _, _ in views:
            m = results[str(build)][name]
            wall, rss = summary(m["wall_s"]), summary(m["rss_bytes"])
            ratio = rss["median"] / dump_bytes
            target = RSS_TARGET.get(name)
            mark = "" if target is None else ("  ok" if ratio <= target else f"  > {target}x")
            print(f"{name:<11} {wall['median']:>7.2f} ({wall['min']:.2f}-{wall['max']:.2f})"
                  f"{rss['median'] / 2**20:>11.1f} ({rss['min'] / 2**20:.1f}-"
                  f"{rss['max'] / 2**20:.1f}) {ratio:>6.2f}x{m['output_bytes'] / args.stacks:>12.0f}"
                  f"{mark}")
            m["wall"] = wall
            m["rss"] = rss
            m["rss_over_dump"] = ratio
            m["output_bytes_per_stack"] = m["output_bytes"] / args.stacks
    (OUT / "heapdiff_memory.json").write_text(json.dumps(
        {"dump_bytes": dump_bytes, "stacks": args.stacks, "rounds": args.rounds,
         "results": results}, indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
