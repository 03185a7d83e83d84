#!/usr/bin/env python3
"""How long a user waits for `heapdiff serve` in a real browser at scale.

    python3 bench/serve_scale.py             # 5 rounds (about 2 minutes)
    python3 bench/serve_scale.py --rounds 1 --stacks-depth 12 --dumps 200   # quick
    python3 bench/serve_scale.py --heapdiff OTHER/heapdiff   # another build, same dumps, rounds interleaved

Two real programs run under the shim (bench/workloads):
- serve_stacks: one live block at each of 65,536 distinct stacks
  (lg_prof_sample:0), one exit dump;
- serve_series: 2,000 manual dumps of one process.
Then, per round, a fresh `heapdiff serve` over both (nothing built yet) and
a headless chromium (Debian's, through chromedriver: bench/tools/webdriver.py):
- first visit: the viewer page of the 65,536-stack dump, from the request to
  the viewer's first drawing (the page loaded, parsed and drawn);
- second visit: the same page again (the server keeps built pages);
- the front page with 2,000 dumps: from navigation start to the first
  paint after the list arrived (the page's own `heapdiffIndex.firstPaintMs`),
  with the timeline's drawn points and the dump rows on the page.
Medians with min-max; the machine's load before and after is printed (the
machine is shared: wall-clock numbers are noisy). Targets: first visit
< 1 s, second < 0.5 s, front page first paint < 0.5 s.
Results: bench/out/serve_scale.json. Python 3.11 standard library only.
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
sys.path.insert(0, str(BENCH / "tools"))
from webdriver import Browser  # noqa: E402

SHIM = ROOT / "target" / "release" / "libheapsample.so"
HEAPDIFF = ROOT / "target" / "release" / "heapdiff"
TARGETS = {"first_visit_s": 1.0, "second_visit_s": 0.5, "front_page_first_paint_s": 0.5}


def build(name: str, work: Path) -> Path:
    binary = work / name
    subprocess.run(["gcc", "-O1", "-g", "-fno-optimize-sibling-calls",
                    str(BENCH / "workloads" / f"{name}.c"), "-o", str(binary), "-ldl"],
                   check=True)
    return binary


def run_under_shim(binary: Path, args: list[str], directory: Path, conf: str):
    directory.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, LD_PRELOAD=str(SHIM),
               PROF_CONF=f"{conf},prof_prefix:{directory}/hs")
    subprocess.run([str(binary), *args], env=env, check=True, stdout=subprocess.DEVNULL)


def start_server(heapdiff: Path, paths: list[Path]):
    server = subprocess.Popen([str(heapdiff), "serve", *map(str, paths), "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = server.stdout.readline()
    url = next(w for w in line.split() if w.startswith("http://")).rstrip("/")
    return server, url


def visit(browser, heapdiff: Path, dirs: list[Path], big: str, m: dict):
    """One round of one build: a fresh server, the large view twice, the
    front page once."""
    server, url = start_server(heapdiff, dirs)
    try:
        page = f"{url}/view?dump=0%2F{big}"
        for visits in (m["first"], m["second"]):
            started = time.monotonic()
            browser.goto(page)
            browser.wait("window.heapdiffViewer && heapdiffViewer.firstDrawMs")
            visits.append(time.monotonic() - started)
        browser.goto("about:blank")
        browser.goto(url + "/")
        browser.wait("window.heapdiffIndex && heapdiffIndex.firstPaintMs !== null")
        m["paint"].append(browser.run("return heapdiffIndex.firstPaintMs;") / 1000)
        m["points"].append(browser.run(
            "return Math.max(...Array.from(document.querySelectorAll('section.process'))"
            ".map(s => heapdiffIndex.drawnPoints(s.dataset.key)));"))
        m["rows"].append(browser.run("return document.querySelectorAll('tr.dump').length;"))
    finally:
        server.kill()
        server.wait()


def load() -> str:
    return open("/proc/loadavg").read().split()[:3].__str__()


def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": len(values)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--stacks-depth", type=int, default=16, help="2^DEPTH stacks (16: 65,536)")
    parser.add_argument("--dumps", type=int, default=2000)
    parser.add_argument("--heapdiff", type=Path, action="append", default=[],
                        help="another heapdiff build to time beside this tree's (repeatable); "
                             "each round runs every build once, in turn")
    args = parser.parse_args()
    builds = [HEAPDIFF, *args.heapdiff]
    for need in (SHIM, *builds):
        if not need.exists():
            sys.exit(f"{need} missing: cargo build --release --workspace first")
    work = OUT / f"serve-scale-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    load_before = load()
    stacks_dir, series_dir = work / "stacks", work / "series"
    run_under_shim(build("serve_stacks", work), [str(args.stacks_depth)], stacks_dir,
                   "lg_prof_sample:0,prof_final:true")
    run_under_shim(build("serve_series", work), [str(args.dumps)], series_dir,
                   "lg_prof_sample:14,prof_exact:true,prof_final:false")
    big = next(stacks_dir.glob("*.prof"))
    dumps = len(list(series_dir.glob("*.prof")))
    print(f"{2 ** args.stacks_depth} stacks in {big.name} ({big.stat().st_size} bytes); "
          f"{dumps} dumps of one process; load before {load_before}")
    measured = {heapdiff: {"first": [], "second": [], "paint": [], "points": [], "rows": []}
                for heapdiff in builds}
    with Browser(1400, 1000) as browser:
        for round_number in range(args.rounds):
            for heapdiff in builds:
                m = measured[heapdiff]
                visit(browser, heapdiff, [stacks_dir, series_dir], big.name, m)
                print(f"round {round_number + 1} ({heapdiff}): first visit {m['first'][-1]:.3f} s, "
                      f"second {m['second'][-1]:.3f} s, front page first paint {m['paint'][-1]:.3f} s "
                      f"({m['points'][-1]} chart points, {m['rows'][-1]} rows)")
    load_after = load()
    results = {
        "stacks": 2 ** args.stacks_depth, "dumps": dumps, "dump_bytes": big.stat().st_size,
        "load_before": load_before, "load_after": load_after, "cores": os.cpu_count(),
        "builds": {str(heapdiff): {
            "first_visit_s": summary(m["first"]), "second_visit_s": summary(m["second"]),
            "front_page_first_paint_s": summary(m["paint"]),
            "timeline_points_drawn": max(m["points"]), "dump_rows_on_page": max(m["rows"]),
        } for heapdiff, m in measured.items()},
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "serve_scale.json").write_text(json.dumps(results, indent=2))
    failed = False
    for heapdiff in builds:
        r = results["builds"][str(heapdiff)]
        print(f"\n{heapdiff}\n| measure | median | min–max | target |\n|---|---|---|---|")
        for key, target in TARGETS.items():
            s = r[key]
            failed |= heapdiff == HEAPDIFF and s["median"] >= target
            print(f"| {key} | {s['median']:.3f} s | {s['min']:.3f}–{s['max']:.3f} s | < {target} s |")
    print(f"\nload before {results['load_before']}, after {results['load_after']}, {os.cpu_count()} cores")
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
