#!/usr/bin/env python3
"""Fork-heavy and dlopen-heavy programs: the shim's cost, side by side with
no preload, medians over alternating rounds.

Measures
  - the fork-per-request loop: 1,000 children one after another, each
    allocating 1 MiB in 4 KiB blocks, writing them, freeing them and
    exiting (a request that uses a megabyte); the whole loop's wall time
    against no preload, the minimal interposer (bench/tools/floor.c) and
    prof:false;
  - a fresh process: /bin/true executed 1,000 times (fork, exec, exit) with
    the preload in the executed program only, against no preload and an
    empty preloaded library, with and without the exit dump (and, with
    --shim-b, another build beside this one), with its page faults; what
    creating a file costs in the dumps' directory (bench/tools/file_create.c);
    and the instructions of one /bin/true under callgrind, loader included;
  - fork_children (bench/workloads/fork_children.c): the parent's fork() and a
    short child's whole life (fork to waitpid), and the page faults of each
    (what a profiler costs a short child is mostly copy-on-write and
    first-touch faults; counts are steady where times are not), for
    children that allocate nothing and children that allocate 1 MiB (so
    they sample and, with prof_fork_final:sampled, write an exit dump; with
    the default, lived, these short children write none); the exit dump's
    own cost is the difference between prof_fork_final:sampled and
    prof_fork_final:none;
  - dl_loop (tests/programs/dl_loop.c): 60,000 dlopen/dlclose iterations over
    20 plugins, CPU time and RSS;
  - pgbench -C -S against PostgreSQL with and without the shim (a backend
    is forked per connection), two ways per round: side by side, two
    identical servers at once, one under the shim, each with its own pgbench
    -c 1 (the TPS ratio of runs that see the same machine at the same
    moments: the steadiest figure on a shared machine); and one after the
    other with -c 2, TPS and the server's CPU time per transaction
    (postmaster and every backend, from getrusage of the reaped server).
    PostgreSQL is installed with apt-get when missing (never by the tests).

python3 bench/fork_heavy.py [--rounds N] [--pgbench-seconds S] [--no-pgbench]
    [--only loop,exec,fork,dl,pgbench] [--shim-b OTHER.so] [--exec-dump-dir DIR]
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
    subprocess.run(["gcc", "-O2", "-o", work / "file_create",
                    ROOT / "bench/tools/file_create.c"], check=True)
    out["file_create"] = work / "file_create"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", work / "floor.so",
                    ROOT / "bench/tools/floor.c", "-ldl"], check=True)
    out["floor"] = work / "floor.so"
    (work / "empty.c").write_text("int fork_heavy_empty_library;\n")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", work / "empty.so",
                    work / "empty.c"], check=True)
    out["empty"] = work / "empty.so"
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


def bench_loop(bins: dict, rounds: int, work: Path) -> list:
    """The fork-per-request loop: (config, median loop ms, median ratio to
    none over the rounds, interleaved)."""
    configs = [("none", None), ("floor", {"LD_PRELOAD": str(bins["floor"])}),
               ("prof:false", shim_env("prof:false")), ("default", shim_env())]
    loops: dict = {}
    for r in range(rounds):
        for name, env in configs[r % len(configs):] + configs[:r % len(configs)]:
            cwd = Path(tempfile.mkdtemp(dir=work))
            v = values(run([bins["fork_children"], "1000", "1048576", "exit", "0", "-", "4096",
                            "keep"], env, cwd))
            loops.setdefault(name, []).append(v["loop_us"] / 1000)
            shutil.rmtree(cwd)
    return [(name, statistics.median(loops[name]),
             statistics.median(x / b for x, b in zip(loops[name], loops["none"])))
            for name, _ in configs]


def exec_configs(bins: dict, shims: list) -> list:
    """The exec'd-program configurations: no preload, an empty library, and
    per shim (name, path) prof:false, the default without the exit dump and
    the default with it."""
    configs = [("none", {}), ("empty library", {"EXEC_PRELOAD": str(bins["empty"])})]
    for name, path in shims:
        tag = f"{name} " if len(shims) > 1 else ""
        configs += [
            (f"{tag}prof:false", {"EXEC_PRELOAD": str(path), "EXEC_PROF_CONF": "prof:false"}),
            (f"{tag}default, prof_final:false",
             {"EXEC_PRELOAD": str(path), "EXEC_PROF_CONF": "prof_final:false"}),
            (f"{tag}default (exit dump)", {"EXEC_PRELOAD": str(path)}),
        ]
    return configs


def bench_exec(bins: dict, rounds: int, work: Path, shims: list, dump_dir: Path) -> list:
    """/bin/true executed 1,000 times, the preload in the executed program
    only, the exit dumps into a fresh directory under `dump_dir`: (config,
    median wall µs per process, median CPU µs per process, its min and max
    over the rounds, median added CPU µs over none, median page faults per
    process). CPU time (user + system of the process) is the steadier
    figure on a shared machine."""
    true = shutil.which("true") or "/bin/true"
    configs = exec_configs(bins, shims)
    lives: dict = {}
    cpus: dict = {}
    faults: dict = {}
    for r in range(rounds):
        for name, env in configs[r % len(configs):] + configs[:r % len(configs)]:
            cwd = Path(tempfile.mkdtemp(dir=dump_dir))
            v = values(run([bins["fork_children"], "1000", "0", "exec", true], env, cwd))
            lives.setdefault(name, []).append(v["child_us"])
            cpus.setdefault(name, []).append(v["child_cpu_us"])
            faults.setdefault(name, []).append(v["child_faults"])
            shutil.rmtree(cwd)
    return [(name, statistics.median(lives[name]), statistics.median(cpus[name]),
             min(cpus[name]), max(cpus[name]),
             statistics.median(x - b for x, b in zip(cpus[name], cpus["none"])),
             statistics.median(faults[name]))
            for name, _ in configs]


def callgrind_exec(bins: dict, shims: list, work: Path) -> list:
    """Instructions of one /bin/true, start to exit (the loader included),
    per configuration, under callgrind: (config, instructions)."""
    true = shutil.which("true") or "/bin/true"
    rows = []
    for name, env in exec_configs(bins, shims):
        cwd = Path(tempfile.mkdtemp(dir=work))
        out = cwd / "callgrind.out"
        preload = {"LD_PRELOAD": env["EXEC_PRELOAD"]} if "EXEC_PRELOAD" in env else {}
        if "EXEC_PROF_CONF" in env:
            preload["PROF_CONF"] = env["EXEC_PROF_CONF"]
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", true],
                       env={**{k: v for k, v in os.environ.items()
                               if k not in ("LD_PRELOAD", "PROF_CONF")}, **preload},
                       cwd=cwd, check=True, capture_output=True)
        totals = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)
        rows.append((name, int(totals.group(1))))
        shutil.rmtree(cwd)
    return rows


def bench_fork(bins: dict, rounds: int, work: Path) -> list:
    # (name, PROF_CONF, directory the dumps go to: None for the work
    # directory, on the disk /tmp is on; /dev/shm to see the exit dump
    # without the file system's cost of creating a file).
    tmpfs = "/dev/shm" if os.path.isdir("/dev/shm") else None
    # The floor (bench/tools/floor.c: every call one jump to the next
    # allocator) is what the targets are stated against; the rounds are
    # interleaved, each starting one configuration later.
    configs = [("none", None, None), ("floor", "floor", None), ("prof:false", "prof:false", None),
               ("default", "", None),
               ("fork_final:sampled", "prof_fork_final:sampled", None),
               ("fork_final:sampled, tmpfs", "prof_fork_final:sampled", tmpfs),
               ("fork_final:none", "prof_fork_final:none", None)]
    results = {}
    for bytes_ in ("0", "1048576"):
        for r in range(rounds):
            for name, conf, where in configs[r % len(configs):] + configs[:r % len(configs)]:
                cwd = Path(tempfile.mkdtemp(dir=where or work))
                env = (None if conf is None else {"LD_PRELOAD": str(bins["floor"])}
                       if conf == "floor" else shim_env(conf))
                v = values(run([bins["fork_children"], "1000", bytes_], env, cwd))
                results.setdefault((bytes_, name), []).append(v)
                shutil.rmtree(cwd)
    rows = []
    for (bytes_, name), vs in sorted(results.items(),
                                     key=lambda kv: (kv[0][0], [c[0] for c in configs].index(kv[0][1]))):
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


def start_server(base: Path, data: Path, port: str, env: dict) -> subprocess.Popen:
    """Start PostgreSQL as our child (so its CPU time and that of every
    backend it reaped come back to us) and wait until it accepts."""
    server = subprocess.Popen(
        as_postgres([PG_BIN / "postgres", "-D", data, "-p", port, "-k", base,
                     "-c", "listen_addresses="]),
        env={**{k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PROF_CONF")},
             **env},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if subprocess.run(as_postgres([PG_BIN / "pg_isready", "-q", "-h", base, "-p", port]),
                          check=False).returncode == 0:
            break
        time.sleep(0.05)
    return server


def stop_server(server: subprocess.Popen, data: Path) -> None:
    run(as_postgres([PG_BIN / "pg_ctl", "-D", data, "-w", "-m", "fast", "stop"]))
    server.wait()


def pgbench_command(base: Path, port: str, clients: int, seconds: int) -> list:
    return as_postgres([PG_BIN / "pgbench", "-h", base, "-p", port, "-C", "-S", "-c",
                        str(clients), "-T", str(seconds), "postgres"])


def tps_of(out: str) -> float:
    return float(re.search(r"tps = ([0-9.]+)", out).group(1))


def serve_pgbench(base: Path, data: Path, port: str, env: dict, seconds: int) -> tuple:
    """One server alone: pgbench -C -S -c 2 against it. Returns (tps, server
    CPU seconds per transaction)."""
    server = start_server(base, data, port, env)
    try:
        out = run(pgbench_command(base, port, 2, seconds))
        done = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
    finally:
        before = cpu_of_children()
        stop_server(server, data)
    return tps_of(out), (cpu_of_children() - before) / max(done, 1)


def side_by_side(base: Path, datas: list, shim_vars: dict, shim_on: int, seconds: int) -> float:
    """Two identical servers at once, one under the shim (`shim_on`), each
    with its own pgbench -C -S -c 1: both see the same machine at the same
    moments, so the ratio of their TPS is far steadier on a shared machine
    than runs one after the other. Returns shim TPS / no-preload TPS."""
    ports = ["54327", "54328"]
    servers = [start_server(base, data, port, shim_vars if i == shim_on else {})
               for i, (data, port) in enumerate(zip(datas, ports))]
    try:
        clients = [subprocess.Popen(pgbench_command(base, port, 1, seconds),
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                   for port in ports]
        tps = [tps_of(client.communicate()[0]) for client in clients]
    finally:
        for server, data in zip(servers, datas):
            stop_server(server, data)
    return tps[shim_on] / tps[1 - shim_on]


def bench_pgbench(rounds: int, seconds: int) -> dict:
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
    twin = base / "data2"
    run(["cp", "-a", data, twin])
    shim = {"LD_PRELOAD": str(shim_copy), "PROF_CONF": f"prof_prefix:{dumps}/pg"}
    tps = {"none": [], "default": []}
    cpu = {"none": [], "default": []}
    paired = []
    try:
        for r in range(rounds):
            for name in ("none", "default") if r % 2 == 0 else ("default", "none"):
                t, c = serve_pgbench(base, data, port, {} if name == "none" else shim, seconds)
                tps[name].append(t)
                cpu[name].append(c)
            # The shim alternates between the two data directories.
            paired.append(side_by_side(base, [data, twin], shim, r % 2, seconds))
        files = len(list(dumps.iterdir()))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    median = statistics.median
    return {
        "tps": (median(tps["none"]), median(tps["default"]),
                median(s / n for s, n in zip(tps["default"], tps["none"]))),
        "cpu_us": (median(cpu["none"]) * 1e6, median(cpu["default"]) * 1e6,
                   median(s / n for s, n in zip(cpu["default"], cpu["none"]))),
        "side_by_side": (median(paired), paired),
        "files": files,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--pgbench-seconds", type=int, default=8)
    p.add_argument("--no-pgbench", action="store_true")
    p.add_argument("--only", default="loop,exec,fork,dl,pgbench",
                   help="comma-separated parts to run: loop, exec, fork, dl, pgbench")
    p.add_argument("--shim-b", type=Path,
                   help="a second build of the shim, measured beside this one in the exec part "
                        "(e.g. main's, for a before/after in one run)")
    p.add_argument("--exec-dump-dir", type=Path,
                   help="where the exec'd programs' exit dumps go (default: the work directory "
                        "under /tmp; /dev/shm takes the file system's cost of creating a file "
                        "out of the figures)")
    args = p.parse_args()
    parts = set(args.only.split(","))
    if not SHIM.exists():
        subprocess.run(["cargo", "build", "--release"], cwd=ROOT, check=True)
    work = Path(tempfile.mkdtemp(prefix="hs-forkbench-"))
    try:
        bins = build(work)
        print(f"load average before: {os.getloadavg()}")
        if "loop" in parts:
            print(f"## fork-per-request loop, 1000 children using 1 MiB (4 KiB blocks, written), "
                  f"medians of {args.rounds} rounds")
            print("| config | loop (ms) | × none |")
            print("|---|---|---|")
            for name, loop_ms, ratio in bench_loop(bins, args.rounds, work):
                print(f"| {name} | {loop_ms:.1f} | {ratio:.3f} |")
        if "exec" in parts:
            shims = [("this", SHIM)] + ([("B", args.shim_b)] if args.shim_b else [])
            dump_dir = args.exec_dump_dir or work
            print(f"\n## /bin/true executed 1000 times, medians of {args.rounds} rounds (µs per "
                  f"process; exit dumps in {dump_dir})")
            print("| preload in the executed program | wall, fork to waitpid | CPU [min–max] "
                  "| CPU added over none | page faults |")
            print("|---|---|---|---|---|")
            for name, life, cpu, low, high, added, faults in bench_exec(
                    bins, args.rounds, work, shims, dump_dir):
                print(f"| {name} | {life:.1f} | {cpu:.1f} [{low:.0f}–{high:.0f}] | {added:+.1f} "
                      f"| {faults:.1f} |")
            cwd = Path(tempfile.mkdtemp(dir=dump_dir))
            created = values(run([bins["file_create"], "1000"], None, cwd))
            shutil.rmtree(cwd)
            print(f"\nthe file system's share (bench/tools/file_create.c, 1,000 files of 849 bytes "
                  f"created, locked, written and renamed as an exit dump does, in {dump_dir}): "
                  f"creation {created['create_us']:.1f} µs (median), write and rename "
                  f"{created['write_rename_us']:.1f} µs, {created['cpu_us']:.1f} µs of CPU per file")
            if shutil.which("valgrind"):
                print("\n## /bin/true start to exit, callgrind instructions")
                print("| preload in the executed program | instructions | over none |")
                print("|---|---|---|")
                rows = callgrind_exec(bins, shims, work)
                for name, instructions in rows:
                    print(f"| {name} | {instructions:,} | {instructions - rows[0][1]:+,} |")
        if "fork" in parts:
            print(f"\n## fork_children, 1000 children, medians of {args.rounds} rounds (µs)")
            print("| child allocates | config | fork() | child fork→waitpid "
                  "| parent's page faults per fork | a child's page faults |")
            print("|---|---|---|---|---|---|")
            for bytes_, name, fork_us, child_us, parent_faults, child_faults in bench_fork(
                    bins, args.rounds, work):
                print(f"| {bytes_} B | {name} | {fork_us:.1f} | {child_us:.1f} "
                      f"| {parent_faults:.1f} | {child_faults:.1f} |")
        if "dl" in parts:
            print(f"\n## dl_loop, 60,000 dlopen/dlclose of 20 plugins, medians of {args.rounds}")
            print("| mode | CPU none (s) | CPU shim (s) | ratio | RSS none (KiB) | RSS shim (KiB) |")
            print("|---|---|---|---|---|---|")
            for mode, c0, c1, r0, r1 in bench_dl(bins, args.rounds, work):
                print(f"| {mode} | {c0:.3f} | {c1:.3f} | {c1 / c0:.2f}x | {r0:.0f} | {r1:.0f} |")
        if "pgbench" in parts and not args.no_pgbench and ensure_postgres():
            print(f"\n## pgbench -C -S, {args.rounds} rounds of {args.pgbench_seconds} s "
                  "(ratios: median of the rounds' shim/none)")
            result = bench_pgbench(args.rounds, args.pgbench_seconds)
            (t0, t1, ratio), (c0, c1, cpu_ratio) = result["tps"], result["cpu_us"]
            paired, rounds = result["side_by_side"]
            print(f"side by side (two servers at once, -c 1 each): shim/none TPS {paired:.3f}x; "
                  f"rounds {[round(x, 3) for x in rounds]}")
            print(f"one after the other (-c 2): tps none {t0:.1f}, shim {t1:.1f}: {ratio:.3f}x; "
                  f"server CPU per transaction none {c0:.0f} us, shim {c1:.0f} us: "
                  f"{cpu_ratio:.3f}x; {result['files']} dump files")
        print(f"load average after: {os.getloadavg()}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
