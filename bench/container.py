#!/usr/bin/env python3
"""What attaching to a process in a container costs, and what collecting
its modules weighs.

    python3 bench/container.py            # 5 trials
    python3 bench/container.py --smoke    # 1 trial

A root holding only bench/workloads/attach_stall.c's program and its
libraries is made in a temporary folder; the program runs as pid 1 of new
PID and mount namespaces chrooted into it (`unshare`, as root). Per trial:
`heapsample attach -o DIR` from the host (the library loaded from a sealed
memfd, the dump directory made inside the container), a first `heapsample
dump` (which brings the dump home and collects every module it names into
DIR/.build-id), a second one (modules already there), and `detach`. The
program records its longest gap between two allocations per 10 ms window,
as bench/attach.py does; the longest gap in the windows around the attach
is its stall. Printed as Markdown with the bytes collected per build-id.
Python 3.11 standard library only; needs a release build.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RELEASE = ROOT / "target" / "release"
HEAPSAMPLE = RELEASE / "heapsample"


def build(work: Path) -> Path:
    program = work / "stall"
    subprocess.run(["gcc", "-O1", "-g", "-o", program, BENCH / "workloads" / "attach_stall.c"], check=True)
    return program


def make_root(work: Path, program: Path) -> Path:
    root = work / "root"
    for sub in ("proc", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    shutil.copy(program, root / "app")
    ldd = subprocess.run(["ldd", program], capture_output=True, text=True, check=True).stdout
    for word in ldd.split():
        if word.startswith("/"):
            inside = root / word.lstrip("/")
            inside.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(word, inside)
    return root


def child_of(parent: int) -> int:
    for _ in range(500):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                comm = Path(f"/proc/{entry}/comm").read_text().strip()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if fields[1] == str(parent) and comm == "app":
                return int(entry)
        time.sleep(0.01)
    raise SystemExit("the container's process did not start")


def timed(args):
    start = time.monotonic()
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{args}: {out.stderr}")
    return time.monotonic() - start, out.stdout


def trial(work: Path, root: Path, index: int):
    dumps = work / f"dumps{index}"
    script = f"mount -t proc proc {root}/proc && exec chroot {root} /app 4"
    proc = subprocess.Popen(["unshare", "--pid", "--mount", "--fork", "sh", "-c", script],
                            stdout=subprocess.PIPE, text=True)
    pid = child_of(proc.pid)
    time.sleep(0.5)
    attach, out = timed([HEAPSAMPLE, "attach", "-o", dumps, str(pid)])
    stopped = float(out.split(" was stopped ")[1].split(" ms")[0])
    time.sleep(0.3)
    first, _ = timed([HEAPSAMPLE, "dump", str(pid)])
    second, _ = timed([HEAPSAMPLE, "dump", str(pid)])
    detach, _ = timed([HEAPSAMPLE, "detach", str(pid)])
    proc.wait(timeout=30)
    sizes = {}
    for path in (dumps / ".build-id").rglob("*"):
        if path.is_file():
            sizes[path.relative_to(dumps / ".build-id")] = path.stat().st_size
    return {"attach_s": attach, "stopped_ms": stopped, "first_dump_s": first,
            "second_dump_s": second, "detach_s": detach, "sizes": sizes}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    trials = 1 if args.smoke else 5
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        root = make_root(work, build(work))
        results = [trial(work, root, i) for i in range(trials)]
    load = os.getloadavg()[0]
    print(f"Container attach, {trials} trials, load {load:.1f} (median [min-max]):\n")
    print("| step | seconds |")
    print("|---|---|")
    for key in ("attach_s", "first_dump_s", "second_dump_s", "detach_s"):
        values = [r[key] for r in results]
        print(f"| {key[:-2].replace('_', ' ')} | {statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}] |")
    stopped = [r["stopped_ms"] for r in results]
    print(f"\nThread stopped during the attach: median {statistics.median(stopped):.1f} ms, at most {max(stopped):.1f} ms.\n")
    print("Collected per build-id (first trial):\n")
    print("| file | bytes |")
    print("|---|---|")
    for name, size in sorted(results[0]["sizes"].items()):
        print(f"| .build-id/{name} | {size:,} |")


if __name__ == "__main__":
    main()
