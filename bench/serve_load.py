#!/usr/bin/env python3
"""heapdiff serve under load: latency of a normal client while many clients
list at once, after clients that left before their answer, and during a
flood of clients that never finish their headers; start-up time over many
dumps; the server's RSS. Wall-clock numbers on a shared machine: the load
average is printed with them.

The dumps are real: tests/programs/serve_growth.c run under the shim (every
allocation sampled, a dump per MiB), copied round-robin to --dumps files.

python3 bench/serve_load.py [--dumps 2000] [--clients 500] [--flood 3000]
    [--rounds 5] [--heapdiff PATH]
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_dumps(work, count):
    program = os.path.join(work, "serve_growth")
    subprocess.run(
        ["gcc", "-O1", "-g", "-fno-pie", "-no-pie", "-pthread",
         os.path.join(ROOT, "tests/programs/serve_growth.c"), "-o", program],
        check=True)
    run_dir = os.path.join(work, "run")
    os.mkdir(run_dir)
    env = dict(os.environ,
               LD_PRELOAD=os.path.join(ROOT, "target/release/libheapsample.so"),
               PROF_CONF="lg_prof_sample:0,prof_exact:true,lg_prof_interval:20,"
                         f"prof_prefix:{run_dir}/d")
    subprocess.run([program], env=env, check=True, stdout=subprocess.DEVNULL)
    sources = sorted(os.path.join(run_dir, n) for n in os.listdir(run_dir) if n.endswith(".prof"))
    served = os.path.join(work, "served")
    os.mkdir(served)
    for i in range(count):
        shutil.copy(sources[i % len(sources)], os.path.join(served, f"d{i:05}.prof"))
    return served


def start_server(heapdiff, served):
    began = time.monotonic()
    server = subprocess.Popen([heapdiff, "serve", served, "--port", "0"],
                              stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    started = time.monotonic() - began
    port = int(line.strip().rstrip("/").rsplit(":", 1)[1])
    return server, port, started


def request(port, path, timeout=120.0):
    """Seconds to a whole answer, and its status (0: none)."""
    began = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Connection: close\r\n\r\n".encode())
            data = b""
            while chunk := s.recv(1 << 16):
                data += chunk
        status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    except OSError:
        status = 0
    return time.monotonic() - began, status


def leave(port, path):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def summary(times):
    times = sorted(times)
    p90 = times[min(len(times) - 1, int(len(times) * 0.9))]
    if len(times) == 1:
        return f"{times[0] * 1000:.1f} ms"
    return (f"{statistics.median(times) * 1000:.1f} ms "
            f"(p90 {p90 * 1000:.1f}, max {times[-1] * 1000:.1f})")


def concurrent(port, clients, path):
    results = []
    lock = threading.Lock()

    def one():
        result = request(port, path)
        with lock:
            results.append(result)

    threads = [threading.Thread(target=one) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = sum(1 for _, status in results if status != 200)
    return [t for t, _ in results], failed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dumps", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--flood", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--heapdiff", default=os.path.join(ROOT, "target/release/heapdiff"))
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="serve-load-")
    try:
        served = make_dumps(work, args.dumps)
        server, port, started = start_server(args.heapdiff, served)
        rows = [("start-up (scan and summary of every dump)", f"{started:.2f} s")]
        idle = [request(port, "/api/dumps")[0] for _ in range(args.rounds)]
        rows.append(("listing, idle server", summary(idle)))
        first = request(port, "/view?dump=d00000.prof")[0]
        again = [request(port, "/view?dump=d00000.prof")[0] for _ in range(args.rounds)]
        rows.append(("view, first visit / later visits", f"{summary([first])} / {summary(again)}"))
        times, failed = concurrent(port, args.clients, "/api/dumps")
        rows.append((f"{args.clients} clients listing at once", f"{summary(times)}, {failed} failed"))
        rows.append(("next listing after them", summary([request(port, "/api/dumps")[0]])))
        for i in range(args.clients):
            leave(port, "/api/dumps" if i % 2 else f"/view?dump=d{i % args.dumps:05}.prof")
        after = [request(port, "/api/dumps")[0]]
        after_view = [request(port, f"/view?dump=d{(args.dumps - 1):05}.prof")[0]]
        rows.append((f"{args.clients} clients that left (half listings, half views): next listing / next view",
                     f"{summary(after)} / {summary(after_view)}"))
        flood = []
        for _ in range(args.flood):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            flood.append(s)
        during = [request(port, "/api/dumps")[0] for _ in range(args.rounds)]
        rows.append((f"listing during a flood of {args.flood} slow clients", summary(during)))
        rows.append(("server RSS after the flood", f"{rss_mib(server.pid):.0f} MiB"))
        for s in flood:
            s.close()
        server.kill()
        server.wait()
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"heapdiff serve, {args.dumps} dumps, {os.cpu_count()} CPUs, load average {load}")
        print("| measurement | result |\n|---|---|")
        for name, value in rows:
            print(f"| {name} | {value} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
