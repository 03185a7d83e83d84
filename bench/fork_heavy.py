#!/usr/bin/env python3
"""Fork-heavy and dlopen-heavy programs: the shim's cost, side by side with
no preload, medians over alternating rounds.

Measures
  - fork_children (bench/workloads/fork_children.c): the parent's fork() and a
    short child's whole life (fork to waitpid), and the page faults of each
    (what a profiler costs a short child is mostly copy-on-write and
    first-touch faults; counts are steady where times are not), for children that allocate
    nothing and children that allocate 1 MiB (so they sample and, with
    prof_fork_final:sampled, write an exit dump; with the default, lived,
    these short children write none); the exit dump's own cost is the
    difference between prof_fork_final:sampled and prof_fork_final:none;
  - dl_loop (tests/programs/dl_loop.c): 60,000 dlopen/dlclose iterations over
    20 plugins, CPU time and RSS;
  - pgbench -C -S against a PostgreSQL started with and without the shim (a
    backend is forked per connection): TPS ratio, and the ratio of the
    server's CPU time per transaction (postmaster and every backend, from
    getrusage of the reaped server), which the machine's load disturbs less. PostgreSQL is installed with
    apt-get when missing (never by the tests).

python3 bench/fork_heavy.py [--rounds N] [--pgbench-seconds S] [--no-pgbench]
"""

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIM = ROOT / "target" / "release" / "libheapsample.so"
PG_BIN = Path("/usr/lib/postgresql/15/bin")


def build(work: Path) -> dict:
    out = {}
    subprocess.run(["gcc", "-O2", "-o", work / "fork_children",
                    ROOT / "bench/workloads/fork_children.c"], check=True)
    out["fork_children"] = work / "fork_children"
    subprocess.run(["gcc", "-O1", "-g", "-o", work / "dl_loop",
                    ROOT / "tests/programs/dl_loop.c", "-ldl"], check=True)
    out["dl_loop"] = work / "dl_loop"
    plugins = work / "plugins"
    plugins.mkdir()
    for i in range(20):
        subprocess.run(["gcc", "-shared", "-fPIC", "-O1", f"-DPLUGIN_ID={i}", "-o",
                        plugins / f"plugin_{i}.so", ROOT / "tests/programs/dl_plugin.c"],
                       check=True)
    out["plugins"] = plugins
    return out


def run(cmd, env_extra=None, cwd=None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PROF_CONF")}
    env.update(env_extra or {})
    return subprocess.run(cmd, env=env, cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


def values(text: str) -> dict:
    return {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", text)}


def shim_env(conf: str = "") -> dict:
    env = {"LD_PRELOAD": str(SHIM)}
    if conf:
        env["PROF_CONF"] = conf
    return env


def bench_fork(bins: dict, rounds: int, work: Path) -> list:
    # (name, PROF_CONF, directory the dumps go to: None for the work
    # directory, on the disk /tmp is on; /dev/shm to see the exit dump
    # without the file system's cost of creating a file).
    tmpfs = "/dev/shm" if os.path.isdir("/dev/shm") else None
    configs = [("none", None, None), ("default", "", None),
               ("fork_final:sampled", "prof_fork_final:sampled", None),
               ("fork_final:sampled, tmpfs", "prof_fork_final:sampled", tmpfs),
               ("fork_final:none", "prof_fork_final:none", None)]
    results = {}
    for bytes_ in ("0", "1048576"):
        for _ in range(rounds):
            for name, conf, where in configs:
                cwd = Path(tempfile.mkdtemp(dir=where or work))
                env = None if conf is None else shim_env(conf)
                v = values(run([bins["fork_children"], "1000", bytes_], env, cwd))
                results.setdefault((bytes_, name), []).append(v)
                shutil.rmtree(cwd)
    rows = []
    for (bytes_, name), vs in results.items():
        rows.append((bytes_, name, *(statistics.median(v[key] for v in vs) for key in
                                     ("fork_us", "child_us", "parent_faults", "child_faults"))))
    return rows


def bench_dl(bins: dict, rounds: int, work: Path) -> list:
    rows = []
    for mode, n in (("rounds", "3000"), ("single", "60000")):
        cpu = {"none": [], "default": []}
        rss = {"none": [], "default": []}
        for _ in range(rounds):
            for name in ("none", "default"):
                cwd = Path(tempfile.mkdtemp(dir=work))
                env = None if name == "none" else shim_env()
                v = values(run([bins["dl_loop"], mode, n, bins["plugins"], "20"], env, cwd))
                cpu[name].append(v["seconds"])
                rss[name].append(v["rss_kib"])
                shutil.rmtree(cwd)
        rows.append((mode, statistics.median(cpu["none"]), statistics.median(cpu["default"]),
                     statistics.median(rss["none"]), statistics.median(rss["default"])))
    return rows


def ensure_postgres() -> bool:
    if (PG_BIN / "pgbench").exists():
        return True
    print("installing postgresql (apt-get)", file=sys.stderr)
    subprocess.run(["apt-get", "install", "-y", "-q", "postgresql"], check=False,
                   capture_output=True)
    return (PG_BIN / "pgbench").exists()


def as_postgres(cmd: list) -> list:
    return ["runuser", "-u", "postgres", "--"] + cmd if os.geteuid() == 0 else cmd


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def serve_pgbench(base: Path, data: Path, port: str, env: dict, seconds: int) -> tuple:
    """Start PostgreSQL as our child (so its CPU time and that of every
    backend it reaped come back to us), run pgbench -C -S against it, stop
    it. Returns (tps, server CPU seconds per transaction)."""
    server = subprocess.Popen(
        as_postgres([PG_BIN / "postgres", "-D", data, "-p", port, "-k", base,
                     "-c", "listen_addresses="]),
        env={**{k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PROF_CONF")},
             **env},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if subprocess.run(as_postgres([PG_BIN / "pg_isready", "-q", "-h", base, "-p", port]),
                              check=False).returncode == 0:
                break
            time.sleep(0.05)
        out = run(as_postgres([PG_BIN / "pgbench", "-h", base, "-p", port, "-C",
                               "-S", "-c", "2", "-T", str(seconds), "postgres"]))
        done = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
        tps = float(re.search(r"tps = ([0-9.]+)", out).group(1))
    finally:
        run(as_postgres([PG_BIN / "pg_ctl", "-D", data, "-w", "-m", "fast", "stop"]))
        before = cpu_of_children()
        server.wait()
    return tps, (cpu_of_children() - before) / max(done, 1)


def bench_pgbench(rounds: int, seconds: int) -> list:
    base = Path(tempfile.mkdtemp(prefix="hs-pgbench-"))
    os.chmod(base, 0o777)
    shim_copy = base / "libheapsample.so"
    shutil.copy(SHIM, shim_copy)
    os.chmod(shim_copy, 0o755)
    data, port = base / "data", "54329"
    dumps = base / "dumps"
    dumps.mkdir()
    os.chmod(dumps, 0o777)
    run(as_postgres([PG_BIN / "initdb", "-D", data, "-A", "trust"]))
    run(as_postgres([PG_BIN / "pg_ctl", "-D", data, "-w", "-l", base / "log", "-o",
                     f"-p {port} -k {base} -c listen_addresses=''", "start"]))
    try:
        run(as_postgres([PG_BIN / "pgbench", "-h", base, "-p", port, "-i", "-s", "1", "-q",
                         "postgres"]))
    finally:
        run(as_postgres([PG_BIN / "pg_ctl", "-D", data, "-w", "stop"]))
    tps = {"none": [], "default": []}
    cpu = {"none": [], "default": []}
    try:
        for r in range(rounds):
            for name in ("none", "default") if r % 2 == 0 else ("default", "none"):
                env = {} if name == "none" else {
                    "LD_PRELOAD": str(shim_copy), "PROF_CONF": f"prof_prefix:{dumps}/pg"}
                t, c = serve_pgbench(base, data, port, env, seconds)
                tps[name].append(t)
                cpu[name].append(c)
        files = len(list(dumps.iterdir()))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    ratios = [s / n for s, n in zip(tps["default"], tps["none"])]
    cpu_ratios = [s / n for s, n in zip(cpu["default"], cpu["none"])]
    return [(statistics.median(tps["none"]), statistics.median(tps["default"]),
             statistics.median(ratios), statistics.median(cpu["none"]) * 1e6,
             statistics.median(cpu["default"]) * 1e6, statistics.median(cpu_ratios), files,
             tps["none"], tps["default"])]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--pgbench-seconds", type=int, default=8)
    p.add_argument("--no-pgbench", action="store_true")
    args = p.parse_args()
    if not SHIM.exists():
        subprocess.run(["cargo", "build", "--release"], cwd=ROOT, check=True)
    work = Path(tempfile.mkdtemp(prefix="hs-forkbench-"))
    try:
        bins = build(work)
        print(f"## fork_children, 1000 children, medians of {args.rounds} rounds (µs)")
        print("| child allocates | config | fork() | child fork→waitpid "
              "| parent's page faults per fork | a child's page faults |")
        print("|---|---|---|---|---|---|")
        for bytes_, name, fork_us, child_us, parent_faults, child_faults in bench_fork(
                bins, args.rounds, work):
            print(f"| {bytes_} B | {name} | {fork_us:.1f} | {child_us:.1f} "
                  f"| {parent_faults:.1f} | {child_faults:.1f} |")
        print(f"\n## dl_loop, 60,000 dlopen/dlclose of 20 plugins, medians of {args.rounds}")
        print("| mode | CPU none (s) | CPU shim (s) | ratio | RSS none (KiB) | RSS shim (KiB) |")
        print("|---|---|---|---|---|---|")
        for mode, c0, c1, r0, r1 in bench_dl(bins, args.rounds, work):
            print(f"| {mode} | {c0:.3f} | {c1:.3f} | {c1 / c0:.2f}x | {r0:.0f} | {r1:.0f} |")
        if not args.no_pgbench and ensure_postgres():
            print(f"\n## pgbench -C -S -c 2 -T {args.pgbench_seconds}, {args.rounds} rounds "
                  "(ratios: median of the rounds' shim/none)")
            for (t0, t1, ratio, c0, c1, cpu_ratio, files, all0,
                 all1) in bench_pgbench(args.rounds, args.pgbench_seconds):
                print(f"tps none {t0:.1f}, shim {t1:.1f}: {ratio:.3f}x; server CPU per "
                      f"transaction none {c0:.0f} us, shim {c1:.0f} us: {cpu_ratio:.3f}x; "
                      f"{files} dump files; rounds none {all0} shim {all1}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
