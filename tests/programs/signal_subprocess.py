"""Python starting subprocesses under prof_signal:USR2.

    python3 signal_subprocess.py PREFIX

CPython starts a subprocess with vfork; the child, running in this process's
memory until it execs, resets every signal handler (the dump signal's too).
Then this process sends itself the dump signal and waits for the signal dump
(`PREFIX.<pid>.*.s*.prof`), prints how many it found, and only then takes the
signal over itself (announced on stderr first).
"""
import glob
import os
import signal
import subprocess
import sys
import time

prefix = sys.argv[1]
for _ in range(3):
    subprocess.run(["true"], check=True)
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def signal_dumps():
    return glob.glob(f"{prefix}.{os.getpid()}.*.s*.prof")


os.kill(os.getpid(), signal.SIGUSR2)
deadline = time.monotonic() + 30
while not signal_dumps() and time.monotonic() < deadline:
    time.sleep(0.01)
print(f"signal dumps after subprocesses: {len(signal_dumps())}", flush=True)
print("taking the signal over", file=sys.stderr, flush=True)
signal.signal(signal.SIGUSR2, lambda number, frame: None)
print("done", flush=True)
