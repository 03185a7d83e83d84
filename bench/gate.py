#!/usr/bin/env python3
"""The instruction-count regression gate (run by scripts/test.sh).

Measures, under callgrind (instruction counts repeat run to run; nothing here
is timed):

- instructions per malloc/free pair added over no preload, for the shim at
  the default period, with `prof_exact:true` and with `lg_prof_sample:0`
  (bench/workloads/pairs.c; per pair = (Ir(2N) − Ir(N)) / N, which cancels
  start-up and exit), and for the one-jump floor (bench/tools/floor.c) as the
  reference;
- the C++ churn's (bench/workloads/cxx_churn.cpp) whole-program instructions
  at `lg_prof_sample:0` over no preload, and the floor's.

and compares them with the committed table bench/gate.json. The sample
events' clock is the one thing in these runs that depends on time: under
valgrind the time stamp counter's calibration (recorder/src/clock.rs) passes
in some runs and not in others, and a run that keeps the vDSO clock costs
about 20 instructions more per sample. So the figures of runs that sample
every allocation are kept per clock (`counter`, `vdso`), each run's clock
read from its profile, and compared with the table's figure for that clock
(a pair of runs on different clocks is measured again). A figure that grew
beyond its tolerance fails the gate; one that fell beyond it passes with a
note to lower the table (`--update` rewrites it from this run, keeping the
table's figure for a clock the run did not see).

    python3 bench/gate.py            # check (exit 1 on a regression)
    python3 bench/gate.py --update   # measure and rewrite bench/gate.json

Uses target/release/libheapsample.so (`--shim` for another build); about a
minute of valgrind on one core. Python 3.11 standard library only.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
TABLE = BENCH / "gate.json"
PAIRS_N = 300_000
CXX_ROUNDS = "4"
SHIM_CONFS = {
    "default": "",
    "prof_exact": "prof_exact:true",
    "lg0": "lg_prof_sample:0",
}
# Tolerances. The counts of runs that sample every allocation, or none,
# repeat to within 0.05 % (a clock reading's path aside, see above). The
# default period's and prof_exact's per-pair figures carry the sampling
# draws of two runs: the samples of N pairs (140 bytes a pair on average, a
# 512 KiB mean interval) are Poisson with mean μ = 26.7, so the difference
# of the 2N and N runs' sample counts has a standard deviation of
# sqrt(3μ) = 8.9 samples, and at about 1,350 instructions a sample (lg 0's
# cost per pair) 0.12 instructions per pair: ±1 is 8 standard deviations, a
# false failure less than once in 10^14 runs (observed spread: 0.42 over
# nine runs).
PAIR_TOLERANCE = {"abs": 1.0, "rel": 0.005}
RATIO_TOLERANCE = 0.005
# Configurations whose figures are kept per clock (every allocation sampled).
PER_CLOCK = ("lg0",)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def compile_c(src: Path, dst: Path, extra: list[str]) -> None:
    cc = "g++" if src.suffix == ".cpp" else "gcc"
    subprocess.run([cc, "-O2", "-g", "-Wall", "-fno-builtin", "-pthread", *extra,
                    "-o", str(dst), str(src)], check=True)


def instructions(argv: list[str], env: dict[str, str], scratch: Path) -> tuple[int, str]:
    """callgrind's instruction count of one run and the clock its sample
    events used (`counter` or `vdso`: the latter if the clock's slow path,
    `clock::now_ns_slow`, or libc's `clock_gettime`, which the vDSO clock's
    reading calls inline, took more than 0.2 % of the run); raises if the
    run fails."""
    out = scratch / "callgrind.out"
    r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv],
                       cwd=scratch, env=env, capture_output=True, text=True)
    m = re.search(r"Collected\s*:\s*(\d+)", r.stderr)
    if r.returncode != 0 or not m:
        out.unlink(missing_ok=True)
        raise RuntimeError(f"{' '.join(argv)} under callgrind failed "
                           f"(exit {r.returncode}): {r.stderr[-600:]}")
    total = int(m.group(1))
    a = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out)],
                       capture_output=True, text=True)
    out.unlink(missing_ok=True)
    slow = max((int(m.group(1).replace(",", "")) for m in
                re.finditer(r"^\s*([\d,]+) .*(clock::now_ns_slow|clock_gettime)", a.stdout, re.M)),
               default=0)
    return total, "vdso" if slow > total // 500 else "counter"


def preload(kind: str, shim: Path, floor: Path, scratch: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "PROF_CONF", "MALLOC_CONF")}
    if kind == "floor":
        env["LD_PRELOAD"] = str(floor)
    elif kind != "none":
        env["LD_PRELOAD"] = str(shim)
        conf = [SHIM_CONFS[kind], f"prof_prefix:{scratch / 'prof'}"]
        env["PROF_CONF"] = ",".join(c for c in conf if c)
    return env


def measure(shim: Path, runs: int) -> dict:
    """The gate's figures; the configurations that sample every allocation
    are measured `runs` times, keeping the last figure per clock."""
    scratch = Path(tempfile.mkdtemp(prefix="heapsample-gate-"))
    try:
        pairs, cxx, floor = scratch / "pairs", scratch / "cxx_churn", scratch / "floor.so"
        compile_c(BENCH / "workloads" / "pairs.c", pairs, [])
        compile_c(BENCH / "workloads" / "cxx_churn.cpp", cxx, [])
        compile_c(BENCH / "tools" / "floor.c", floor, ["-shared", "-fPIC", "-ldl"])
        per_pair: dict[str, dict[str, float]] = {}
        for kind in ("none", "floor", *SHIM_CONFS):
            env = preload(kind, shim, floor, scratch)
            # A pair of runs whose clocks differ measures no pair: it is run
            # again, up to four times as often as asked.
            kept = 0
            for _ in range(4 * runs if kind in PER_CLOCK else 1):
                if kept == (runs if kind in PER_CLOCK else 1):
                    break
                one, clock = instructions([str(pairs), str(PAIRS_N)], env, scratch)
                two, clock2 = instructions([str(pairs), str(2 * PAIRS_N)], env, scratch)
                if kind in PER_CLOCK and clock != clock2:
                    log(f"  pairs {kind:10} the two runs' clocks differ ({clock}, {clock2}): again")
                    continue
                kept += 1
                key = clock if kind in PER_CLOCK else "any"
                per_pair.setdefault(kind, {})[key] = (two - one) / PAIRS_N
                log(f"  pairs {kind:10} {key:8} {(two - one) / PAIRS_N:9.2f} instructions per pair")
        whole: dict[str, dict[str, int]] = {}
        for kind in ("none", "floor", "lg0"):
            env = preload(kind, shim, floor, scratch)
            for _ in range(runs if kind in PER_CLOCK else 1):
                ir, clock = instructions([str(cxx), CXX_ROUNDS], env, scratch)
                key = clock if kind in PER_CLOCK else "any"
                whole.setdefault(kind, {})[key] = ir
                log(f"  cxx_churn {CXX_ROUNDS} {kind:6} {key:8} {ir:,} instructions")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    none_pair, none_whole = per_pair["none"]["any"], whole["none"]["any"]
    return {
        "pairs_n": PAIRS_N,
        "cxx_churn_rounds": int(CXX_ROUNDS),
        "pair_none": round(none_pair, 2),
        "added_per_pair": {k: {c: round(v - none_pair, 2) for c, v in per_pair.get(k, {}).items()}
                           for k in ("floor", *SHIM_CONFS)},
        "cxx_churn_none": none_whole,
        "cxx_churn_over_none": {k: {c: round(v / none_whole, 4) for c, v in whole[k].items()}
                                for k in ("floor", "lg0")},
    }


def compare(table: dict, now: dict) -> list[str]:
    """The regressions of `now` against `table`, one line each; prints notes."""
    failures = []

    def check(name: str, old: float, new: float, tolerance: float) -> None:
        line = f"{name}: table {old}, now {new} (tolerance ±{tolerance:.3g})"
        if new > old + tolerance:
            failures.append(line)
            log(f"  REGRESSION {line}")
        elif new < old - tolerance:
            log(f"  lower the table (python3 bench/gate.py --update): {line}")
        else:
            log(f"  ok {line}")

    def compared(figure: str, name: str, tolerance) -> None:
        for kind, by_clock in table[figure].items():
            measured = {c: v for c, v in now[figure][kind].items() if c in by_clock}
            if not measured:
                failures.append(f"{name}, {kind}: no run on a clock the table has "
                                f"({', '.join(by_clock)})")
                log(f"  {failures[-1]}")
            for clock, new in measured.items():
                old = by_clock[clock]
                check(f"{name}, {kind} ({clock} clock)", old, new, tolerance(old))

    compared("added_per_pair", "instructions per pair added over none",
             lambda old: max(PAIR_TOLERANCE["abs"], PAIR_TOLERANCE["rel"] * old))
    compared("cxx_churn_over_none", "C++ churn instructions over none",
             lambda old: RATIO_TOLERANCE * old)
    return failures


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--update", action="store_true", help="rewrite bench/gate.json from this run")
    p.add_argument("--shim", type=Path, default=ROOT / "target" / "release" / "libheapsample.so")
    args = p.parse_args()
    for tool in ("valgrind", "gcc", "g++"):
        if not shutil.which(tool):
            log(f"gate: {tool} is not installed")
            return 1
    if not args.shim.exists():
        log(f"gate: {args.shim} is not built")
        return 1
    now = measure(args.shim.resolve(), 6 if args.update else 3)
    if args.update:
        # A clock this run did not see keeps the table's figure for it (the
        # clock a run takes depends on the calibration under valgrind).
        if TABLE.exists():
            before = json.loads(TABLE.read_text())
            for figure in ("added_per_pair", "cxx_churn_over_none"):
                for kind, by_clock in before.get(figure, {}).items():
                    for clock, value in by_clock.items():
                        now[figure].setdefault(kind, {}).setdefault(clock, value)
        TABLE.write_text(json.dumps(now, indent=2) + "\n")
        log(f"gate: wrote {TABLE.relative_to(ROOT)}")
        return 0
    table = json.loads(TABLE.read_text())
    if (table["pairs_n"], table["cxx_churn_rounds"]) != (now["pairs_n"], now["cxx_churn_rounds"]):
        log("gate: the table was measured at other sizes; run --update")
        return 1
    failures = compare(table, now)
    if failures:
        log(f"gate: {len(failures)} figure(s) grew beyond tolerance")
        return 1
    log("gate: every figure within tolerance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
