#!/usr/bin/env python3
"""Two builds of libheapsample.so side by side on the benchmark's real programs.

    python3 bench/two_shims.py --base OLD.so [--new NEW.so] [--conf lg_prof_sample:0]
                               [--workloads cxx,python,perl] [--rounds 7]

Each round runs every workload under the base build and the new one, in an
order that alternates from round to round (bench/tools/runit.c measures
wall and user+sys CPU time), after one warm-up round. Reports per workload
the median of the per-round CPU-time ratios new/base with their min-max,
and the size of the final dump each build wrote (the same PROF_CONF, with
`prof_prefix` pointing into a scratch directory): what a format change costs
in bytes. The workloads run at their exact-mode sizes (bench/run.py
--exact). Python 3.11 standard library only; builds the tools and workloads
through bench/run.py.
"""
import argparse
import importlib.util
import statistics
import subprocess
from pathlib import Path

BENCH = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("bench_run", BENCH / "run.py")
run = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run)


def one(wl, shim: Path, conf: str, prefix: Path) -> tuple[float, int]:
    """CPU seconds of one run, and the size of its final dump (0 if none)."""
    for old in prefix.parent.glob(prefix.name + "*"):
        old.unlink()
    result = run.SCRATCH / "result.txt"
    result.parent.mkdir(parents=True, exist_ok=True)
    runner = [str(run.BIN / "runit"), "-o", str(result),
              "-e", f"LD_PRELOAD={shim}", "-e", f"PROF_CONF={conf},prof_prefix:{prefix}"]
    subprocess.run(runner + ["--"] + run.command(wl, run.Config("x", "shim"), False),
                   cwd=run.OUT, env=run.base_env(wl), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    res = run.parse_result(result.read_text()) if result.exists() else {}
    result.unlink(missing_ok=True)
    if res.get("status", -1) != 0:
        raise SystemExit(f"{wl.name} under {shim} failed: {res}")
    finals = sorted(prefix.parent.glob(prefix.name + "*.f.prof"))
    size = finals[-1].stat().st_size if finals else 0
    return (res["utime_us"] + res["stime_us"]) / 1e6, size


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", type=Path, required=True, help="the build to compare against")
    p.add_argument("--new", type=Path, default=run.ROOT / "target" / "release" / "libheapsample.so")
    p.add_argument("--conf", default="lg_prof_sample:0", help="PROF_CONF for both")
    p.add_argument("--workloads", default="cxx,python,perl")
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    run.EXACT_SIZE = True
    run.build_tools_and_workloads(False)
    workloads = run.select(run.all_workloads(), args.workloads)
    shims = {"base": args.base.resolve(), "new": args.new.resolve()}
    scratch = run.SCRATCH / "two-shims"
    scratch.mkdir(parents=True, exist_ok=True)
    times = {(w.name, s): [] for w in workloads for s in shims}
    sizes = {(w.name, s): 0 for w in workloads for s in shims}
    for round_ in range(args.rounds + 1):
        for wl in workloads:
            order = list(shims) if round_ % 2 == 0 else list(reversed(shims))
            for name in order:
                cpu, size = one(wl, shims[name], args.conf, scratch / f"{wl.name}-{name}")
                if round_ > 0:
                    times[(wl.name, name)].append(cpu)
                    sizes[(wl.name, name)] = size
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"PROF_CONF={args.conf}; {args.rounds} rounds after a warm-up; load {' '.join(load)}\n")
    print("| workload | CPU s base (median) | CPU s new (median) | new/base median [min-max] "
          "| final dump base | final dump new | size new/base |")
    print("|---|---|---|---|---|---|---|")
    for wl in workloads:
        base, new = times[(wl.name, "base")], times[(wl.name, "new")]
        ratios = [n / b for n, b in zip(new, base)]
        sb, sn = sizes[(wl.name, "base")], sizes[(wl.name, "new")]
        print(f"| {wl.name} | {statistics.median(base):.3f} | {statistics.median(new):.3f} | "
              f"{statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}] | "
              f"{sb:,} B | {sn:,} B | {sn / sb if sb else float('nan'):.2f} |")


if __name__ == "__main__":
    main()
