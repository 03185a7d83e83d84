#!/usr/bin/env python3
"""What attaching costs a running process, and what it costs after.

    python3 bench/attach.py            # 7 stall trials, callgrind at 2M pairs
    python3 bench/attach.py --smoke    # 1 trial, callgrind at 100k pairs

1. Stall: bench/workloads/attach_stall.c allocates in a loop on its only
   thread and records, per 10 ms window, its longest gap between two
   allocations (CLOCK_MONOTONIC, the clock this script reads too). The
   script attaches with `heapsample attach` (that thread is the one stopped:
   the process has no other), dumps and detaches, each half a second apart;
   each trial is a fresh process, so every attach loads the library. The
   longest gap in the windows around each operation is the stall it caused;
   the longest gap of the windows away from them is the machine's own noise.
2. Overhead after the attach: callgrind instructions per malloc/free pair
   (Ir(2N) - Ir(N)) / N of bench/workloads/attach_pairs.c with nothing, with
   the library preloaded, and attached (dlopen + heapsample_attach made by
   the program itself: callgrind cannot be attached to from outside; the
   takeover is the one `heapsample attach` triggers), at the default period.

Results go to bench/out/attach.json and are printed as Markdown.
Python 3.11 standard library only; needs a release build (`cargo build
--release`) and valgrind.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
OUT = BENCH / "out"
BIN = OUT / "bin"
RELEASE = ROOT / "target" / "release"
SHIM = RELEASE / "libheapsample.so"
CLI = RELEASE / "heapsample"
WINDOW_MS = 10


def build() -> None:
    BIN.mkdir(parents=True, exist_ok=True)
    for name, extra in (("attach_stall", []), ("attach_pairs", ["-ldl"])):
        tmp = BIN / f".{name}.{os.getpid()}"
        subprocess.run(["gcc", "-O2", "-g", "-Wall", "-fno-builtin", "-o", str(tmp),
                        str(BENCH / "workloads" / f"{name}.c"), *extra], check=True)
        os.replace(tmp, BIN / name)


def heapsample(*args: str) -> tuple[float, float, str]:
    """Run the command; returns its start and end (monotonic ns) and output."""
    start = time.monotonic_ns()
    r = subprocess.run([str(CLI), *args], capture_output=True, text=True)
    end = time.monotonic_ns()
    if r.returncode != 0:
        sys.exit(f"heapsample {' '.join(args)} failed: {r.stderr.strip()}")
    return start, end, r.stdout


def stall_trial(out_dir: Path) -> dict:
    """One fresh process: attach, dump, detach; the longest gap around each."""
    seconds = 3
    proc = subprocess.Popen([str(BIN / "attach_stall"), str(seconds), str(WINDOW_MS)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    pid = str(proc.pid)
    time.sleep(0.5)
    events = {}
    events["attach"] = heapsample("attach", pid, "-o", str(out_dir))
    time.sleep(0.5)
    events["dump"] = heapsample("dump", pid)
    time.sleep(0.5)
    events["detach"] = heapsample("detach", pid)
    windows = []
    for line in proc.stdout:
        m = re.match(r"window (\d+) (\d+)", line)
        if m:
            windows.append((int(m.group(1)), int(m.group(2))))
    proc.wait()
    stopped = re.search(r"was stopped ([\d.]+) ms", events["attach"][2])
    span = WINDOW_MS * 1_000_000
    result = {"attach_reported_stop_ms": float(stopped.group(1)) if stopped else None}
    busy = []
    for name, (start, end, _) in events.items():
        around = [gap for (w, gap) in windows if start - span <= w <= end + span]
        result[f"{name}_gap_ms"] = max(around, default=0) / 1e6
        busy.append((start - span, end + span))
    quiet = [gap for (w, gap) in windows[1:] if not any(a <= w <= b for a, b in busy)]
    result["quiet_gap_ms"] = max(quiet, default=0) / 1e6
    return result


def callgrind_ir(pairs: int, env: dict, args: list[str]) -> int:
    out = OUT / f"attach-callgrind.{os.getpid()}"
    r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                        str(BIN / "attach_pairs"), str(pairs), *args],
                       capture_output=True, text=True, env=env, cwd=OUT)
    out.unlink(missing_ok=True)
    m = re.search(r"Collected\s*:\s*(\d+)", r.stderr)
    if r.returncode != 0 or not m:
        sys.exit(f"callgrind failed: {r.stderr[-800:]}")
    return int(m.group(1))


def overhead(pairs: int) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PROF_CONF")}
    prefix = f"prof_prefix:{OUT}/attach-bench,prof_final:false"
    configs = {
        "none": (base, []),
        "preloaded": (base | {"LD_PRELOAD": str(SHIM), "PROF_CONF": prefix}, []),
        "attached": (base, [str(SHIM), prefix]),
    }
    result = {}
    for name, (env, args) in configs.items():
        ir1, ir2 = callgrind_ir(pairs, env, args), callgrind_ir(2 * pairs, env, args)
        result[name] = (ir2 - ir1) / pairs
    result["attached_vs_preloaded_pct"] = 100.0 * (result["attached"] / result["preloaded"] - 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="one trial, few pairs")
    parser.add_argument("--trials", type=int, default=7)
    args = parser.parse_args()
    for needed in (SHIM, CLI):
        if not needed.exists():
            sys.exit(f"{needed} missing: run `cargo build --release` first")
    build()
    trials = 1 if args.smoke else args.trials
    out_dir = OUT / "attach-dumps"
    out_dir.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    stalls = [stall_trial(out_dir) for _ in range(trials)]
    for f in out_dir.glob("*.prof"):
        f.unlink()
    costs = overhead(100_000 if args.smoke else 2_000_000)
    report = {"load_before": load, "load_after": os.getloadavg(), "trials": stalls,
              "callgrind_ir_per_pair": costs}
    (OUT / "attach.json").write_text(json.dumps(report, indent=1))

    def row(key: str) -> str:
        values = [t[key] for t in stalls if t[key] is not None]
        return (f"| {key.removesuffix('_ms').replace('_', ' ')} | {statistics.median(values):.1f} "
                f"| {min(values):.1f}–{max(values):.1f} |")

    print(f"Load average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after; "
          f"{trials} trial(s), {WINDOW_MS} ms windows.\n")
    print("| longest gap of the allocating thread (ms) | median | min–max |")
    print("|---|---|---|")
    for key in ("attach_gap_ms", "dump_gap_ms", "detach_gap_ms", "quiet_gap_ms",
                "attach_reported_stop_ms"):
        print(row(key))
    print("\n| callgrind instructions per malloc/free pair | Ir |")
    print("|---|---|")
    for name in ("none", "preloaded", "attached"):
        print(f"| {name} | {costs[name]:.2f} |")
    print(f"| attached vs preloaded | {costs['attached_vs_preloaded_pct']:+.2f} % |")


if __name__ == "__main__":
    main()
