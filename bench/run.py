#!/usr/bin/env python3
"""heapsample overhead benchmark.

Builds the workloads, then runs every workload under every configuration,
interleaved round by round (A B C ... then again, the order rotated each
round) after one warm-up round, and reports medians and paired ratios.

    python3 bench/run.py                # full run: 5 rounds, ~25 min
    python3 bench/run.py --smoke        # CI: tiny sizes, one run each, < 60 s
    python3 bench/run.py --callgrind-only   # only the per-operation costs
    python3 bench/run.py --help

Each run is started through bench/tools/runit.c, a tiny C launcher that forks
the workload and reports wall time, user+sys CPU time and peak RSS from
wait4(); the preload variables are set only in the workload's environment.
Ratios are paired: in each round a configuration's wall (or CPU) time is
divided by its baseline's in the same round; the median and the min-max of
those per-round ratios are reported.  Results go to bench/out/results.json
and bench/out/results.md.  Python 3.11 standard library only.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
OUT = BENCH / "out"
BIN = OUT / "bin"
BUILT_SHIM = ROOT / "target" / "release" / "libheapsample.so"
SHIM = BIN / "libheapsample.so"  # snapshot of BUILT_SHIM taken at start-up
SCRATCH = OUT / f"run-{os.getpid()}"  # per-invocation: result files, dumps, heaptrack traces
JEMALLOC = Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")
TCMALLOC = Path("/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4")
PRELOAD_VARS = ("LD_PRELOAD", "PROF_CONF", "MALLOC_CONF", "PYTHONMALLOC", "HEAPPROFILE")
EXACT_SIZE = False  # set by --exact: workloads run at their `exact` size


# --------------------------------------------------------------------------
# Configurations
# --------------------------------------------------------------------------

@dataclass
class Config:
    """One way of running a workload; `floor` is the config it is also compared to."""
    name: str
    kind: str  # none | shim | floor | jemalloc | tcmalloc | heaptrack
    conf: str = ""  # PROF_CONF or MALLOC_CONF value
    floor: str | None = None
    missing: str | None = None  # why it cannot run, if it cannot


def all_configs() -> list[Config]:
    return [
        Config("none", "none"),
        Config("shim-passthru", "shim", "prof:false"),
        Config("shim-inactive", "shim", "prof_active:false", floor="shim-passthru"),
        Config("shim-default", "shim", "", floor="shim-passthru"),
        Config("shim-lg14", "shim", "lg_prof_sample:14", floor="shim-passthru"),
        Config("shim-exact", "shim", "prof_exact:true", floor="shim-passthru"),
        Config("shim-lg0", "shim", "lg_prof_sample:0", floor="shim-passthru"),
        Config("floor", "floor"),
        Config("jemalloc", "jemalloc"),
        Config("jemalloc-prof", "jemalloc", "prof:true", floor="jemalloc"),
        Config("jemalloc-prof-lg0", "jemalloc", "prof:true,lg_prof_sample:0", floor="jemalloc"),
        Config("tcmalloc", "tcmalloc"),
        Config("gperftools-heapprof", "tcmalloc", "heapprofile", floor="tcmalloc"),
        Config("heaptrack", "heaptrack"),
    ]


# The configurations of the default run (the exact-mode run adds shim-lg0,
# floor and jemalloc-prof-lg0; --configs picks any).
DEFAULT_CONFIGS = ("none", "shim-passthru", "shim-inactive", "shim-default", "shim-lg14",
                   "shim-exact", "jemalloc", "jemalloc-prof", "heaptrack")
EXACT_CONFIGS = ("none", "floor", "shim-default", "shim-lg14", "shim-lg0", "jemalloc",
                 "jemalloc-prof-lg0", "tcmalloc", "gperftools-heapprof", "heaptrack")
EXACT_CALLGRIND_CONFIGS = ("none", "floor", "shim-passthru", "shim-default", "shim-lg14",
                           "shim-lg0", "jemalloc", "jemalloc-prof", "jemalloc-prof-lg0")
EXACT_WORKLOADS = ("python", "perl", "gcc", "cxx", "cxx-4t", "node")


def shim_conf(cfg: Config, workload: str) -> str:
    """PROF_CONF for a shim config; dumps go under bench/out/prof/."""
    prefix = f"prof_prefix:{SCRATCH / 'prof' / workload}"
    return ",".join(x for x in (cfg.conf, prefix) if x)


def preload_env(cfg: Config, workload: str) -> dict[str, str]:
    """Variables set only in the workload's environment (not the runner's)."""
    if cfg.kind == "shim":
        return {"LD_PRELOAD": str(SHIM), "PROF_CONF": shim_conf(cfg, workload)}
    if cfg.kind == "jemalloc":
        env = {"LD_PRELOAD": str(JEMALLOC)}
        if cfg.conf:
            env["MALLOC_CONF"] = cfg.conf
        return env
    if cfg.kind == "floor":
        return {"LD_PRELOAD": str(BIN / "floor.so")}
    if cfg.kind == "tcmalloc":
        env = {"LD_PRELOAD": str(TCMALLOC)}
        if cfg.conf:
            # gperftools' heap profiler records every allocation with its stack.
            env["HEAPPROFILE"] = str(SCRATCH / "heapprof" / workload)
        return env
    return {}


# --------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------

@dataclass
class Workload:
    """A program and its arguments at full and smoke size."""
    name: str
    desc: str
    argv: list[str]
    full: list[str]
    smoke: list[str]
    env: dict[str, str] = field(default_factory=dict)
    heaptrack: bool = True  # heaptrack is 4-10x slower: only on a subset
    exact: list[str] = field(default_factory=list)  # size for the exact-mode run


def python_exe() -> str:
    """The real CPython binary (not a pyenv shell shim, which would add noise)."""
    if Path("/usr/bin/python3").exists():
        return str(Path("/usr/bin/python3").resolve())
    return str(Path(sys.executable).resolve())


def node_exe() -> str:
    return shutil.which("node") or shutil.which("nodejs") or "/usr/bin/node"


def all_workloads() -> list[Workload]:
    wl = BENCH / "workloads"
    perl = shutil.which("perl") or "/usr/bin/perl"
    gcc = shutil.which("gcc") or "/usr/bin/gcc"
    gcc_argv = [gcc, "-O2", "-c", "-o", str(OUT / "big.o")]
    return [
        Workload("pairs", "tight malloc/free loop, 8 sizes 16-480 B",
                 [str(BIN / "pairs")], ["100000000"], ["1000000"], heaptrack=False),
        Workload("mixed-1t", "mixed sizes 16 B-64 KiB, 4096 live slots, 1 thread",
                 [str(BIN / "mixed"), "1"], ["25000000"], ["200000"], heaptrack=False),
        Workload("mixed-Nt", "as mixed-1t, one thread per core",
                 [str(BIN / "mixed"), "0"], ["12000000"], ["100000"], heaptrack=False),
        Workload("larson", "ring of threads (one per core, >= 2) freeing each other's blocks",
                 [str(BIN / "larson"), "0"], ["4000000"], ["50000"], heaptrack=False),
        Workload("cxx", "C++ std::map/std::string/std::vector churn",
                 [str(BIN / "cxx_churn")], ["1000"], ["10"], exact=["60"]),
        Workload("cxx-4t", "the C++ churn on 4 threads at once",
                 [str(BIN / "cxx_churn")], ["250", "4"], ["3", "4"], exact=["15", "4"]),
        Workload("python", "python3 object churn, PYTHONMALLOC=malloc",
                 [python_exe(), str(wl / "churn.py")], ["80"], ["2"],
                 env={"PYTHONMALLOC": "malloc"}, exact=["6"]),
        Workload("perl", "perl nested-hash churn",
                 [perl, str(wl / "hash.pl")], ["20"], ["1"], exact=["2"]),
        Workload("gcc", "gcc -O2 -c on a generated C file (120 functions; 5 in smoke)",
                 gcc_argv, [str(OUT / "big-full.c")], [str(OUT / "big-smoke.c")],
                 exact=[str(OUT / "big-exact.c")]),
        Workload("node", "node churn: Buffers, strings, Maps, JSON",
                 [node_exe(), str(wl / "churn.js")], ["300"], ["3"], exact=["20"]),
    ]


# --------------------------------------------------------------------------
# Setup and build
# --------------------------------------------------------------------------

def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def dpkg_installed(pkg: str) -> bool:
    r = subprocess.run(["dpkg", "-s", pkg], capture_output=True, text=True)
    return r.returncode == 0 and "Status: install ok installed" in r.stdout


def ensure_packages(pkgs: list[str]) -> None:
    """apt-get install the packages that dpkg says are missing (idempotent)."""
    if not shutil.which("dpkg"):
        log("setup: no dpkg; skipping package installation")
        return
    missing = [p for p in pkgs if not dpkg_installed(p)]
    if not missing:
        return
    if os.geteuid() != 0:
        log(f"setup: missing {missing} and not root; those configs will be skipped")
        return
    log(f"setup: installing {missing}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], env=env, check=False)
    r = subprocess.run(["apt-get", "install", "-y", "-qq", *missing], env=env)
    if r.returncode != 0:
        log(f"setup: apt-get install {missing} failed; those configs will be skipped")


def compile_c(src: Path, dst: Path, extra: list[str]) -> None:
    """Compile to a scratch file, then rename: binaries in use are never rewritten."""
    cc = "g++" if src.suffix == ".cpp" else "gcc"
    tmp = SCRATCH / dst.name
    tmp.parent.mkdir(parents=True, exist_ok=True)
    cmd = [cc, "-O2", "-g", "-Wall", "-fno-builtin", "-pthread", *extra, "-o", str(tmp), str(src)]
    subprocess.run(cmd, check=True)
    os.replace(tmp, dst)


def build_tools_and_workloads(smoke: bool) -> None:
    BIN.mkdir(parents=True, exist_ok=True)
    tools, wl = BENCH / "tools", BENCH / "workloads"
    compile_c(tools / "runit.c", BIN / "runit", [])
    compile_c(tools / "alloccount.c", BIN / "alloccount.so", ["-shared", "-fPIC"])
    compile_c(tools / "floor.c", BIN / "floor.so", ["-shared", "-fPIC", "-ldl"])
    for name in ("pairs", "mixed", "larson"):
        compile_c(wl / f"{name}.c", BIN / name, [])
    compile_c(wl / "cxx_churn.cpp", BIN / "cxx_churn", [])
    gen = wl / "gen_c.py"
    for size, count in (("smoke", 5), ("exact", 15), ("full", 120)):
        if size == "smoke" or not smoke:
            tmp = SCRATCH / f"big-{size}.c"
            subprocess.run([sys.executable, str(gen), str(count), str(tmp)], check=True)
            os.replace(tmp, OUT / f"big-{size}.c")


def shim_problem() -> str | None:
    """None if the shim snapshot exists and exports malloc; else why not."""
    name = BUILT_SHIM.relative_to(ROOT) if BUILT_SHIM.is_relative_to(ROOT) else BUILT_SHIM
    if not SHIM.exists():
        return f"{name} not built"
    r = subprocess.run(["nm", "-D", "--defined-only", str(SHIM)], capture_output=True, text=True)
    if r.returncode == 0 and not re.search(r"\bT malloc$", r.stdout, re.M):
        return f"{name} does not export malloc (placeholder build?)"
    return None


def ensure_shim(build: bool) -> None:
    """Build the shim if missing, then snapshot it so one run uses one build
    even if target/ is rebuilt meanwhile."""
    if not BUILT_SHIM.exists() and build:
        log("build: cargo build --release -p heapsample-shim")
        r = subprocess.run(["cargo", "build", "--release", "-p", "heapsample-shim"], cwd=ROOT)
        if r.returncode != 0:
            log("build: shim build failed; shim configs will be reported as missing")
    if BUILT_SHIM.exists():
        BIN.mkdir(parents=True, exist_ok=True)
        tmp = SCRATCH / (SHIM.name + ".tmp")
        tmp.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(BUILT_SHIM, tmp)
        os.replace(tmp, SHIM)  # atomic: a concurrent run never sees a partial file
    else:
        SHIM.unlink(missing_ok=True)


def mark_missing(configs: list[Config]) -> None:
    shim = shim_problem()
    for cfg in configs:
        if cfg.kind == "shim":
            cfg.missing = shim
        elif cfg.kind == "jemalloc" and not JEMALLOC.exists():
            cfg.missing = f"{JEMALLOC} not installed"
        elif cfg.kind == "tcmalloc" and not TCMALLOC.exists():
            cfg.missing = f"{TCMALLOC} not installed"
        elif cfg.kind == "heaptrack" and not shutil.which("heaptrack"):
            cfg.missing = "heaptrack not installed"
        elif cfg.kind == "floor" and not (BIN / "floor.so").exists():
            cfg.missing = "bench/out/bin/floor.so not built"


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------

def base_env(wl: Workload) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PRELOAD_VARS}
    env.update(wl.env)
    return env


def workload_args(wl: Workload, smoke: bool) -> list[str]:
    if smoke:
        return wl.smoke
    return wl.exact if EXACT_SIZE and wl.exact else wl.full


def command(wl: Workload, cfg: Config, smoke: bool) -> list[str]:
    argv = wl.argv + workload_args(wl, smoke)
    if cfg.kind == "heaptrack":
        argv = [shutil.which("heaptrack"), "-o", str(SCRATCH / "heaptrack" / wl.name)] + argv
    return argv


def parse_result(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", text)}


def clean_dumps() -> None:
    for sub in ("prof", "heaptrack", "heapprof"):
        shutil.rmtree(SCRATCH / sub, ignore_errors=True)
        (SCRATCH / sub).mkdir(parents=True, exist_ok=True)


def run_once(wl: Workload, cfg: Config, smoke: bool) -> dict:
    """Run one workload under one config; returns the measurement or an error."""
    result, log_path = SCRATCH / "result.txt", SCRATCH / "run.log"
    result.parent.mkdir(parents=True, exist_ok=True)
    runner = [str(BIN / "runit"), "-o", str(result)]
    for k, v in preload_env(cfg, wl.name).items():
        runner += ["-e", f"{k}={v}"]
    with open(log_path, "w") as logf:
        subprocess.run(runner + ["--"] + command(wl, cfg, smoke), cwd=OUT, env=base_env(wl),
                       stdout=logf, stderr=subprocess.STDOUT, check=False)
    text = log_path.read_text(errors="replace")
    clean_dumps()
    res = parse_result(result.read_text()) if result.exists() else {"status": -1}
    result.unlink(missing_ok=True)
    return measurement(res, text)


def measurement(res: dict[str, int], text: str) -> dict:
    status = res.get("status", -1)
    m = {
        "ok": status == 0,
        "wall": res.get("wall_ns", 0) / 1e9,
        "cpu": (res.get("utime_us", 0) + res.get("stime_us", 0)) / 1e6,
        "rss_mib": res.get("maxrss_kb", 0) / 1024,
    }
    ns = re.search(r"\bns_per_pair=([\d.]+)", text)
    if ns:
        m["ns_per_pair"] = float(ns.group(1))
    if not m["ok"]:
        m["error"] = describe_status(status) + "\n" + "\n".join(text.splitlines()[-15:])
    return m


def describe_status(status: int) -> str:
    if status < 0:
        return "runner failed"
    if status & 0x7F:
        return f"killed by signal {status & 0x7F}"
    return f"exit status {status >> 8}"


def rotated(configs: list[Config], r: int) -> list[Config]:
    k = r % len(configs)
    return configs[k:] + configs[:k]


def runnable(wl: Workload, configs: list[Config], smoke: bool) -> list[Config]:
    return [c for c in configs
            if not c.missing and (c.kind != "heaptrack" or wl.heaptrack or smoke)]


def wait_for_quiet(max_load: float | None, max_wait: float = 180.0) -> None:
    """Before a round, wait (at most max_wait s) until the 1-min load average is below max_load."""
    if max_load is None:
        return
    deadline = time.monotonic() + max_wait
    while os.getloadavg()[0] >= max_load and time.monotonic() < deadline:
        time.sleep(5)


def run_workload(wl: Workload, configs: list[Config], rounds: int, warmup: bool,
                 smoke: bool, max_load: float | None = None) -> dict[str, list[dict]]:
    """All rounds of one workload, interleaved; returns runs per config name."""
    active = runnable(wl, configs, smoke)
    runs: dict[str, list[dict]] = {c.name: [] for c in active}
    schedule = ([-1] if warmup else []) + list(range(rounds))
    for r in schedule:
        wait_for_quiet(max_load)
        for cfg in rotated(active, max(r, 0)):
            m = run_once(wl, cfg, smoke)
            m["load"] = os.getloadavg()[0]
            tag = "warm-up" if r < 0 else f"round {r + 1}"
            status = "ok" if m["ok"] else "FAILED"
            log(f"  {wl.name:9} {cfg.name:14} {tag:8} wall {m['wall']:7.3f}s "
                f"cpu {m['cpu']:7.3f}s rss {m['rss_mib']:7.1f}MiB load {m['load']:4.1f} {status}")
            if not m["ok"]:
                log("    " + m["error"].replace("\n", "\n    "))
            if r >= 0:
                runs[cfg.name].append(m)
    return runs


def count_allocations(wl: Workload, smoke: bool) -> int | None:
    """Allocation calls made by one run (all processes), via alloccount.so."""
    counts = SCRATCH / "allocs.txt"
    counts.unlink(missing_ok=True)
    env = {"LD_PRELOAD": str(BIN / "alloccount.so"), "ALLOCCOUNT_FILE": str(counts)}
    subprocess.run(command(wl, Config("none", "none"), smoke), cwd=OUT,
                   env=base_env(wl) | env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    if not counts.exists():
        return None
    return sum(int(n) for n in re.findall(r"allocs=(\d+)", counts.read_text()))


# --------------------------------------------------------------------------
# Statistics and reporting
# --------------------------------------------------------------------------

def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def paired(runs: list[dict], base: list[dict], key: str) -> list[float]:
    """Per-round ratio runs[i][key] / base[i][key], skipping failed rounds."""
    out = []
    for a, b in zip(runs, base):
        if a["ok"] and b["ok"] and b[key] > 0:
            out.append(a[key] / b[key])
    return out


def ratio_stats(xs: list[float]) -> dict | None:
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def summarize_config(cfg: Config, runs: dict[str, list[dict]]) -> dict:
    mine = runs[cfg.name]
    ok = [m for m in mine if m["ok"]]
    s = {
        "runs": len(mine), "failed": len(mine) - len(ok),
        "wall": median([m["wall"] for m in ok]),
        "cpu": median([m["cpu"] for m in ok]),
        "rss_mib": median([m["rss_mib"] for m in ok]),
        "ns_per_pair": median([m["ns_per_pair"] for m in ok if "ns_per_pair" in m]),
    }
    for label, base in (("vs_none", "none"), ("vs_floor", cfg.floor)):
        if base and base != cfg.name and base in runs:
            s[label] = {k: ratio_stats(paired(mine, runs[base], k)) for k in ("wall", "cpu")}
            deltas = [a["rss_mib"] - b["rss_mib"] for a, b in zip(mine, runs[base])
                      if a["ok"] and b["ok"]]
            s[label]["rss_delta_mib"] = median(deltas)
    return s


def summarize(configs: list[Config], runs: dict[str, list[dict]]) -> dict:
    return {c.name: summarize_config(c, runs) for c in configs if c.name in runs}


def fmt(x: float | None, spec: str) -> str:
    return "–" if x is None else format(x, spec)


def fmt_ratio(r: dict | None) -> str:
    if not r:
        return "–"
    return f"{r['median']:.3f} [{r['min']:.3f}–{r['max']:.3f}]"


def table_rows(summary: dict, configs: list[Config], wl: Workload, smoke: bool) -> list[list[str]]:
    rows = []
    for cfg in configs:
        if cfg.missing:
            rows.append([cfg.name, f"missing: {cfg.missing}"] + [""] * 6)
            continue
        s = summary.get(cfg.name)
        if s is None:
            why = "not run (heaptrack: subset only)" if cfg.kind == "heaptrack" else "not run"
            rows.append([cfg.name, why] + [""] * 6)
            continue
        vn, vf = s.get("vs_none", {}), s.get("vs_floor", {})
        rows.append([
            cfg.name + (f" ({s['failed']} FAILED)" if s["failed"] else ""),
            fmt(s["wall"], ".3f"), fmt(s["cpu"], ".3f"), fmt(s["rss_mib"], ".1f"),
            fmt_ratio(vn.get("wall")), fmt_ratio(vn.get("cpu")),
            fmt(vn.get("rss_delta_mib"), "+.1f"),
            fmt_ratio(vf.get("wall")) + (f" vs {cfg.floor}" if vf else ""),
        ])
    return rows


HEADER = ["config", "wall s", "CPU s", "peak RSS MiB", "wall × none [min–max]",
          "CPU × none [min–max]", "ΔRSS MiB vs none", "wall × floor [min–max]"]


def markdown_table(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def workload_heading(wl: Workload, allocs: int | None, summary: dict, smoke: bool) -> str:
    args = " ".join(Path(a).name for a in workload_args(wl, smoke))
    head = f"### {wl.name}: {wl.desc} (args: {args})"
    base = summary.get("none", {}).get("wall")
    if allocs is not None and base:
        head += f"\n\n{allocs:,} allocations per run, {allocs / base / 1e6:.2f} M allocations/s" \
                " (count from bench/tools/alloccount.c, over the median no-preload wall time)"
    return head


def pairs_markdown(configs: list[Config], runs: dict[str, list[dict]]) -> str:
    """ns per malloc/free pair (loop thread-CPU time inside pairs.c), paired per round."""
    lines = ["| config | ns/pair (median) | added ns vs none [min–max] | added ns vs floor |",
             "|---|---|---|---|"]
    for cfg in configs:
        if cfg.name not in runs:
            continue
        ns = [m.get("ns_per_pair") for m in runs[cfg.name]]
        cells = [cfg.name, fmt(median([x for x in ns if x is not None]), ".2f")]
        for base in ("none", cfg.floor):
            diffs = [a - b for a, b in zip(ns, [m.get("ns_per_pair") for m in runs.get(base, [])])
                     if a is not None and b is not None] if base and base != cfg.name else []
            cells.append(f"{median(diffs):+.2f} [{min(diffs):+.2f}–{max(diffs):+.2f}]"
                         + (f" vs {base}" if base != "none" else "") if diffs else "–")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# Per-operation cost under callgrind
# --------------------------------------------------------------------------

CALLGRIND_CONFIGS = ("none", "shim-passthru", "shim-default", "shim-exact",
                     "jemalloc", "jemalloc-prof")


def callgrind_ir(cfg: Config, pairs: int) -> int | None:
    """Total instructions (Ir) callgrind counts for `pairs pairs`."""
    env = base_env(Workload("pairs", "", [], [], [])) | preload_env(cfg, "callgrind")
    out = SCRATCH / "callgrind.out"
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
           str(BIN / "pairs"), str(pairs)]
    r = subprocess.run(cmd, cwd=OUT, env=env, capture_output=True, text=True)
    out.unlink(missing_ok=True)
    clean_dumps()
    m = re.search(r"Collected\s*:\s*(\d+)", r.stderr)
    if r.returncode != 0 or not m:
        log(f"  callgrind {cfg.name}: failed (exit {r.returncode})\n{r.stderr[-800:]}")
        return None
    return int(m.group(1))


def run_callgrind(configs: list[Config], n: int) -> dict[str, dict]:
    """Instructions per malloc/free pair: (Ir(2N) - Ir(N)) / N cancels setup."""
    if not shutil.which("valgrind"):
        log("callgrind: valgrind not installed; skipped")
        return {}
    results = {}
    for cfg in configs:
        if cfg.name not in CALLGRIND_CONFIGS:
            continue
        if cfg.missing:
            results[cfg.name] = {"missing": cfg.missing}
            continue
        ir1, ir2 = callgrind_ir(cfg, n), callgrind_ir(cfg, 2 * n)
        per = (ir2 - ir1) / n if ir1 is not None and ir2 is not None else None
        results[cfg.name] = {"n": n, "ir_n": ir1, "ir_2n": ir2, "ir_per_pair": per}
        log(f"  callgrind {cfg.name:14} Ir/pair {fmt(per, '.2f')}")
    return results


def callgrind_markdown(results: dict[str, dict]) -> str:
    if not results:
        return "callgrind: not run (valgrind missing)"
    base = results.get("none", {}).get("ir_per_pair")
    lines = ["| config | Ir(N) | Ir(2N) | instructions per pair | added vs none |",
             "|---|---|---|---|---|"]
    for name, r in results.items():
        if "missing" in r:
            lines.append(f"| {name} | missing: {r['missing']} | | | |")
            continue
        per = r["ir_per_pair"]
        added = per - base if per is not None and base is not None else None
        lines.append(f"| {name} | {fmt(r['ir_n'], ',')} | {fmt(r['ir_2n'], ',')} | "
                     f"{fmt(per, '.2f')} | {fmt(added, '+.2f')} |")
    n = next((r["n"] for r in results.values() if "n" in r), 0)
    return f"N = {n:,} pairs (bench/workloads/pairs.c); per pair = (Ir(2N) − Ir(N)) / N\n\n" \
        + "\n".join(lines)


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

# --------------------------------------------------------------------------
# Exact mode: whole-program instructions per configuration, and where the
# profiler's instructions go at lg_prof_sample:0
# --------------------------------------------------------------------------

# Parts of a sample, by function (inclusive instructions, callgrind_annotate).
# A part's functions must not call each other's (no double counting).
PARTS = (
    ("walk", r"heapsample_recorder::backtrace::(\w+<_>::)?capture(_with)?$"),
    ("intern", r"heapsample_recorder::sample_event::new_record$"),
    ("sample event", r"::(on_countdown_expired|on_sampled_free)$"),
)
CALLGRIND_TIMEOUT_S = 1200


def callgrind_workload(wl: Workload, cfg: Config, keep: Path | None = None) -> int | None:
    """Instructions of one whole run (children included, as for gcc's cc1)."""
    out_dir = SCRATCH / "cg"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    env = base_env(wl) | preload_env(cfg, wl.name)
    cmd = ["valgrind", "--tool=callgrind", "--trace-children=yes",
           f"--callgrind-out-file={out_dir / 'cg.%p'}", *command(wl, cfg, False)]
    try:
        r = subprocess.run(cmd, cwd=OUT, env=env, capture_output=True, text=True,
                           timeout=CALLGRIND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        log(f"  callgrind {wl.name} {cfg.name}: timed out after {CALLGRIND_TIMEOUT_S} s")
        return None
    clean_dumps()
    collected = [int(n) for n in re.findall(r"Collected\s*:\s*(\d+)", r.stderr)]
    if r.returncode != 0 or not collected:
        log(f"  callgrind {wl.name} {cfg.name}: failed (exit {r.returncode})\n{r.stderr[-800:]}")
        return None
    if keep is not None:
        shutil.rmtree(keep, ignore_errors=True)
        shutil.copytree(out_dir, keep)
    return sum(collected)


def sample_parts(out_dir: Path) -> dict[str, int]:
    """Inclusive instructions of each part of the sample event, summed over
    the processes' callgrind files; `sample event` is what the event costs
    beyond the other parts."""
    totals = {name: 0 for name, _ in PARTS}
    for f in sorted(out_dir.glob("cg.*")):
        r = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(f)],
                           capture_output=True, text=True)
        seen: set[str] = set()
        for line in r.stdout.splitlines():
            m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+\S*?:(\S+)", line)
            if not m or m.group(2) in seen:
                continue
            seen.add(m.group(2))
            for name, pattern in PARTS:
                if re.search(pattern, m.group(2)):
                    totals[name] += int(m.group(1).replace(",", ""))
    event = totals["sample event"] - totals["walk"] - totals["intern"]
    totals["sample event"] = max(event, 0)
    return totals


def events_clock(out_dir: Path, ir: int) -> str:
    """The clock the run's sample events kept, as bench/gate.py tells it:
    `vdso` when the clock's slow path (`clock::now_ns_slow`, inclusive; or
    libc's `clock_gettime`, which the vDSO clock's reading calls inline, so
    a program's own readings count too) took more than 0.2 % of the run
    (the counter's calibration failed under
    valgrind), else `counter`. It moves a lg 0 figure by ~20 instructions
    per sample, and which one a run keeps depends on the machine's load."""
    slow = 0
    for f in sorted(out_dir.glob("cg.*")):
        r = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(f)],
                           capture_output=True, text=True)
        slow += max((int(m.group(1).replace(",", "")) for m in
                     re.finditer(r"^\s*([\d,]+) .*(clock::now_ns_slow|clock_gettime)",
                                 r.stdout, re.M)),
                    default=0)
    return "vdso" if slow > 0.002 * ir else "counter"


def run_exact_callgrind(workloads: list[Workload], configs: list[Config],
                        progress=lambda partial: None) -> dict:
    results: dict[str, dict] = {}
    for wl in workloads:
        per: dict[str, dict] = {}
        for cfg in configs:
            if cfg.name not in EXACT_CALLGRIND_CONFIGS:
                continue
            if cfg.missing:
                per[cfg.name] = {"missing": cfg.missing}
                continue
            keep = SCRATCH / "cg-keep" if cfg.name == "shim-lg0" else None
            ir = callgrind_workload(wl, cfg, keep)
            per[cfg.name] = {"ir": ir}
            if keep is not None and ir is not None:
                per[cfg.name]["parts"] = sample_parts(keep)
                per[cfg.name]["clock"] = events_clock(keep, ir)
            clock = f"  ({per[cfg.name]['clock']} clock)" if "clock" in per[cfg.name] else ""
            log(f"  callgrind {wl.name:7} {cfg.name:18} Ir {fmt(ir, ',')}{clock}")
            results[wl.name] = per
            progress(results)
        results[wl.name] = per
    return results


def exact_markdown(workloads: list[Workload], cg: dict, walls: dict) -> str:
    """One table: instructions and wall-clock ratios against no preload, side by side."""
    cols = [c for c in EXACT_CONFIGS if c != "none"]
    head = ["workload"] + [f"{c} Ir × / CPU × / wall ×" for c in cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for wl in workloads:
        per, summary = cg.get(wl.name, {}), walls.get(wl.name, {})
        base = per.get("none", {}).get("ir")
        cells = [wl.name]
        for c in cols:
            ir = per.get(c, {}).get("ir")
            ir_ratio = fmt(ir / base, ".3f") if ir and base else "–"
            vs_none = summary.get(c, {}).get("vs_none", {})
            times = [f"{r['median']:.2f}" if r else "–"
                     for r in (vs_none.get("cpu"), vs_none.get("wall"))]
            cells.append(f"{ir_ratio} / {times[0]} / {times[1]}")
        lines.append("| " + " | ".join(cells) + " |")
    floor = ["", "**Default period against the minimal interposer** (callgrind "
             "instructions over no preload):", "",
             "| workload | floor | shim-default | default − floor | jemalloc-prof − jemalloc |",
             "|---|---|---|---|---|"]
    for wl in workloads:
        per = cg.get(wl.name, {})
        base = per.get("none", {}).get("ir")
        f, d = per.get("floor", {}).get("ir"), per.get("shim-default", {}).get("ir")
        j, jp = per.get("jemalloc", {}).get("ir"), per.get("jemalloc-prof", {}).get("ir")
        gap = f"{(d - f) / base * 100:+.2f} %" if base and f and d else "–"
        je_gap = f"{(jp - j) / base * 100:+.2f} %" if base and j and jp else "–"
        floor.append(f"| {wl.name} | {fmt(f / base if f and base else None, '.4f')} | "
                     f"{fmt(d / base if d and base else None, '.4f')} | {gap} | {je_gap} |")
    parts = ["", "**Where the profiler's instructions go at lg_prof_sample:0** (inclusive "
             "callgrind instructions per allocation call; `rest` = lg 0 − floor − the parts):",
             "", "| workload | allocations | walk | intern (new stacks) | rest of the sample "
             "event and the sampled free (live table included) | rest | lg 0 − floor |",
             "|---|---|---|---|---|---|---|"]
    for wl in workloads:
        per = cg.get(wl.name, {})
        lg0, fl = per.get("shim-lg0", {}), per.get("floor", {}).get("ir")
        allocs = walls.get(wl.name, {}).get("_allocs")
        p = lg0.get("parts")
        if not p or not allocs or not lg0.get("ir") or not fl:
            parts.append(f"| {wl.name} | – | – | – | – | – | – |")
            continue
        extra = lg0["ir"] - fl
        rest = extra - sum(p.values())
        cells = [f"{p[name] / allocs:.0f}" for name, _ in PARTS]
        parts.append(f"| {wl.name} | {allocs:,} | " + " | ".join(cells)
                     + f" | {rest / allocs:.0f} | {extra / allocs:.0f} |")
    return "\n".join(lines + floor + parts)


# --------------------------------------------------------------------------
# Dump pause and per-sample cost
# --------------------------------------------------------------------------

PAUSE_FIELDS = ("max_ns", "p999_ns", "p99_ns", "p50_ns")


def run_pause(smoke: bool, rounds: int) -> list[dict]:
    """tests/programs/trig_pause.c under the shim at lg 0: one thread times
    every malloc+free pair while another writes dumps of STACKS distinct
    stacks; the pair latencies during dumps vs between them."""
    src = ROOT / "tests" / "programs" / "trig_pause.c"
    exe = BIN / "trig_pause"
    compile_c(src, exe, ["-O1", "-no-pie", "-ldl"])
    stacks, dumps = ("1000", "2") if smoke else ("10000", "10")
    results = []
    for r in range(rounds):
        work = SCRATCH / f"pause-{r}"
        work.mkdir(parents=True, exist_ok=True)
        env = base_env(Workload("pause", "", [], [], [])) | {
            "LD_PRELOAD": str(SHIM), "PROF_CONF": "lg_prof_sample:0,prof_final:false"}
        p = subprocess.run([str(exe), stacks, dumps], cwd=work, env=env,
                           capture_output=True, text=True, timeout=300)
        shutil.rmtree(work, ignore_errors=True)
        if p.returncode != 0:
            log(f"  pause round {r + 1}: failed (exit {p.returncode})\n{p.stderr[-800:]}")
            results.append({"failed": True})
            continue
        result: dict = {"stacks": int(stacks)}
        for line in p.stdout.splitlines():
            fields = dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
            if line.startswith("pause "):
                result[fields.pop("window")] = fields
            elif line.startswith("dump "):
                result["dump"] = fields
        log(f"  pause round {r + 1}: during dumps max "
            f"{result.get('during_dump', {}).get('max_ns')} ns, between max "
            f"{result.get('between_dumps', {}).get('max_ns')} ns, dump max "
            f"{result.get('dump', {}).get('max_ms')} ms")
        results.append(result)
    return results


def pause_markdown(results: list[dict]) -> str:
    head = "| round | window | pairs | " + " | ".join(f.replace("_ns", "") + " µs"
                                                    for f in PAUSE_FIELDS) + " | dump max / mean ms |"
    lines = [head, "|---" * (4 + len(PAUSE_FIELDS)) + "|"]
    for r, res in enumerate(results, 1):
        if res.get("failed"):
            lines.append(f"| {r} | failed | | | | | | |")
            continue
        dump = res.get("dump", {})
        for window in ("during_dump", "between_dumps"):
            w = res.get(window, {})
            cells = [f"{int(w[f]) / 1000:.1f}" if f in w else "–" for f in PAUSE_FIELDS]
            tail = f"{dump.get('max_ms', '–')} / {dump.get('mean_ms', '–')}" \
                if window == "during_dump" else ""
            lines.append(f"| {r} | {window} | {w.get('pairs', '–')} | " + " | ".join(cells)
                         + f" | {tail} |")
    stacks = next((r["stacks"] for r in results if "stacks" in r), 0)
    return (f"tests/programs/trig_pause.c at lg_prof_sample:0: {stacks:,} distinct live "
            "stacks, one thread times each malloc(64)+free pair (CLOCK_MONOTONIC) while "
            "another writes dumps 5 ms apart; `between_dumps` is the same thread's "
            "control window.\n\n" + "\n".join(lines))


def run_capture_bench(smoke: bool) -> str | None:
    """The unwinder's per-capture benchmark (depths 10, 30, 100)."""
    if smoke:
        return None
    p = subprocess.run(["cargo", "run", "--release", "-q", "-p", "heapsample-unwind",
                        "--example", "capture_bench"], cwd=ROOT, capture_output=True,
                       text=True)
    if p.returncode != 0:
        log(f"capture_bench failed (exit {p.returncode})\n{p.stderr[-800:]}")
        return None
    return p.stdout.strip()


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true",
                   help="tiny sizes, one run per config, no warm-up; exit 1 on any failure")
    p.add_argument("--rounds", type=int, default=5, help="measured rounds (default 5)")
    p.add_argument("--workloads", help="comma-separated subset of workload names")
    p.add_argument("--configs", help="comma-separated subset of config names")
    p.add_argument("--no-callgrind", action="store_true", help="skip the callgrind part")
    p.add_argument("--callgrind-only", action="store_true", help="only the callgrind part")
    p.add_argument("--callgrind-pairs", type=int, default=None,
                   help="N for callgrind (default 1,000,000; smoke 20,000)")
    p.add_argument("--max-load", type=float, default=None,
                   help="before each round wait (up to 3 min) for the 1-min load average "
                        "to drop below this (e.g. 2.5 on a shared 2-core machine)")
    p.add_argument("--results", default="results",
                   help="base name of the result files in bench/out/ (default results[-smoke])")
    p.add_argument("--no-setup", action="store_true", help="do not apt-get install anything")
    p.add_argument("--no-build-shim", action="store_true",
                   help="do not cargo build the shim when it is missing")
    p.add_argument("--exact", action="store_true",
                   help="exact-mode run: python, perl, gcc, cxx, node at small sizes under "
                        "none, floor, default, lg 14, lg 0, jemalloc (lg 0) and heaptrack; "
                        "wall-clock ratios and callgrind instructions side by side, and the "
                        "per-part cost of a sample at lg 0")
    p.add_argument("--callgrind-configs",
                   help="--exact: comma-separated configs measured under callgrind "
                        "(default: --configs, else the exact-mode set)")
    p.add_argument("--no-wall", action="store_true",
                   help="--exact: skip the wall-clock rounds (callgrind only)")
    p.add_argument("--shim", type=Path, default=None,
                   help="benchmark this libheapsample.so instead of target/release's")
    return p.parse_args()


def select(items: list, names: str | None) -> list:
    if not names:
        return items
    wanted = names.split(",")
    unknown = set(wanted) - {i.name for i in items}
    if unknown:
        sys.exit(f"unknown names: {sorted(unknown)}")
    return [i for i in items if i.name in wanted]


def setup(args: argparse.Namespace) -> list[Config]:
    global BUILT_SHIM, SHIM, EXACT_SIZE
    if not args.no_setup:
        pkgs = ["libjemalloc2", "libgoogle-perftools4", "heaptrack", "valgrind", "gcc", "g++",
                "perl", "binutils", "nodejs"]
        ensure_packages(pkgs)
    if args.shim:
        # Another build (e.g. the base branch's): snapshot it privately.
        BUILT_SHIM = args.shim.resolve()
        SHIM = SCRATCH / "libheapsample.so"
    EXACT_SIZE = args.exact
    ensure_shim(not args.no_build_shim and not args.shim)
    build_tools_and_workloads(args.smoke)
    clean_dumps()
    default = EXACT_CONFIGS if args.exact else DEFAULT_CONFIGS
    configs = select(all_configs(), args.configs or ",".join(default))
    mark_missing(configs)
    for c in configs:
        if c.missing:
            log(f"config {c.name}: MISSING ({c.missing})")
    return configs


def git_head() -> str | None:
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                       capture_output=True, text=True)
    return r.stdout.strip() or None


def machine_info() -> dict:
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "uname": " ".join(os.uname()),
        "shim": str(BUILT_SHIM) if SHIM.exists() else None,
        "shim_mtime": time.ctime(SHIM.stat().st_mtime) if SHIM.exists() else None,
        "git_head": git_head(),
    }


def main() -> int:
    args = parse_args()
    try:
        return run(args)
    finally:
        shutil.rmtree(SCRATCH, ignore_errors=True)


def run_exact(args: argparse.Namespace, configs: list[Config], report: dict,
              md: list[str]) -> int:
    """--exact: interleaved wall-clock rounds and whole-program callgrind counts."""
    names = args.workloads.split(",") if args.workloads else list(EXACT_WORKLOADS)
    workloads = [wl for wl in all_workloads() if wl.name in names]
    rounds = args.rounds
    walls: dict[str, dict] = {}
    failures = 0
    for wl in workloads if not args.no_wall else []:
        log(f"workload {wl.name} (exact-mode size)")
        runs = run_workload(wl, configs, rounds, True, False, args.max_load)
        summary = summarize(configs, runs)
        failures += sum(s["failed"] for s in summary.values())
        summary["_allocs"] = count_allocations(wl, False)
        walls[wl.name] = summary
        report["workloads"][wl.name] = {"desc": wl.desc, "summary": summary, "runs": runs}
        md.append(workload_heading(wl, summary["_allocs"], summary, False) + "\n\n"
                  + markdown_table(table_rows(summary, configs, wl, False)))
        write_results(args.results, report, md)
    if args.no_wall:
        for wl in workloads:
            walls[wl.name] = {"_allocs": count_allocations(wl, False)}
    cg: dict = {}
    if not args.no_callgrind and shutil.which("valgrind"):
        chosen = (args.callgrind_configs or args.configs or ",".join(EXACT_CALLGRIND_CONFIGS)) \
            .split(",")
        cg_configs = [c for c in all_configs()
                      if c.name in EXACT_CALLGRIND_CONFIGS and c.name in chosen]
        mark_missing(cg_configs)
        log("callgrind: whole-program instructions per configuration")
        cg = run_exact_callgrind(workloads, cg_configs,
                                 lambda partial: write_results(
                                     args.results, report | {"exact_callgrind": partial}, md))
        report["exact_callgrind"] = cg
    section = "### Exact mode and the default period: instructions and wall clock\n\n" \
        + f"Callgrind instructions (whole program, children included) and median CPU-time " \
        f"and wall-clock ratios of {rounds} interleaved rounds, all over no preload, at the " \
        "exact-mode sizes.\n\n" + exact_markdown(workloads, cg, walls)
    print("\n" + section + "\n", flush=True)
    md.insert(1, section)
    report["machine"]["loadavg_end"] = os.getloadavg()
    write_results(args.results, report, md)
    return 1 if failures else 0


def write_results(name: str, report: dict, md: list[str]) -> None:
    """Write (or rewrite, as a long run goes on) bench/out/NAME.json and .md."""
    base = OUT / name
    base.with_suffix(".json").write_text(json.dumps(report, indent=1, default=str))
    base.with_suffix(".md").write_text("\n\n".join(md) + "\n")
    log(f"wrote {base}.json and {base}.md")


def run(args: argparse.Namespace) -> int:
    configs = setup(args)
    rounds = 1 if args.smoke else args.rounds
    report = {"machine": machine_info(), "smoke": args.smoke, "rounds": rounds,
              "configs": {c.name: {"kind": c.kind, "conf": c.conf, "floor": c.floor,
                                   "missing": c.missing} for c in configs},
              "workloads": {}}
    mach = report["machine"]
    md = [f"Run {mach['date']}, {rounds} round(s), {mach['cpus']} CPUs, "
          f"1-min load at start {mach['loadavg_start'][0]:.1f}, HEAD {mach['git_head']}, "
          f"shim built {mach['shim_mtime']} (snapshot in bench/out/bin)"]
    failures = 0
    if args.exact:
        return run_exact(args, configs, report, md)
    if args.callgrind_only:
        args.no_callgrind = False
    else:
        for wl in select(all_workloads(), args.workloads):
            log(f"workload {wl.name}")
            runs = run_workload(wl, configs, rounds, not args.smoke, args.smoke,
                                args.max_load)
            allocs = count_allocations(wl, args.smoke)
            summary = summarize(configs, runs)
            failures += sum(s["failed"] for s in summary.values())
            report["workloads"][wl.name] = {"desc": wl.desc, "allocs": allocs,
                                            "summary": summary, "runs": runs}
            section = workload_heading(wl, allocs, summary, args.smoke) + "\n\n" + \
                markdown_table(table_rows(summary, configs, wl, args.smoke))
            if wl.name == "pairs":
                section += "\n\n#### ns per malloc/free pair (pairs loop, thread CPU time measured inside the process)\n\n" \
                    + pairs_markdown(configs, runs)
            print("\n" + section + "\n", flush=True)
            md.append(section)
    if not args.no_callgrind:
        n = args.callgrind_pairs or (20_000 if args.smoke else 1_000_000)
        log("callgrind: instructions per malloc/free pair")
        report["callgrind"] = run_callgrind(configs, n)
        failures += sum(1 for r in report["callgrind"].values()
                        if "missing" not in r and r["ir_per_pair"] is None)
        section = "### callgrind instructions per malloc/free pair\n\n" + \
            callgrind_markdown(report["callgrind"])
        print("\n" + section + "\n", flush=True)
        md.append(section)
    if not args.callgrind_only and not args.workloads and not args.configs:
        log("dump pause: allocation latency while dumps of many stacks are written")
        report["pause"] = run_pause(args.smoke, 1 if args.smoke else 3)
        failures += sum(1 for r in report["pause"] if r.get("failed"))
        section = "### Allocation pause during dumps\n\n" + pause_markdown(report["pause"])
        print("\n" + section + "\n", flush=True)
        md.append(section)
        capture = run_capture_bench(args.smoke)
        if capture:
            report["capture_bench"] = capture
            section = "### Per-sample cost: one stack capture (unwind/examples/capture_bench.rs)\n\n" \
                + "```text\n" + capture + "\n```"
            print("\n" + section + "\n", flush=True)
            md.append(section)
    report["machine"]["loadavg_end"] = os.getloadavg()
    base = OUT / (args.results + ("-smoke" if args.smoke else ""))
    base.with_suffix(".json").write_text(json.dumps(report, indent=1))
    base.with_suffix(".md").write_text("\n\n".join(md) + "\n")
    log(f"wrote {base}.json and {base}.md")
    if failures:
        log(f"{failures} run(s) FAILED")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
