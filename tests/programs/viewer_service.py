"""A CPython service for the viewer tests (run with PYTHONMALLOC=malloc):
a slow leak, a transient peak, three threads (CPython names them all
after the process) and deep recursion. Dumps are written by the program
itself (heapsample_dump through ctypes) at the end of every round and at
the top of the peak, so the series is the same on every run.

Each of ROUNDS rounds, remember() keeps 200 strings of 2,000 characters
(the leak, ~400 KB a round); in round PEAK_ROUND, build_report() holds 24
blocks of 1 MiB, dumps, and drops them (the peak). Before the rounds,
three threads keep 64, 128 and 192 KiB each, and a 40-deep recursion keeps
256 KiB. Prints its truth: "leak <chars per round> rounds <n> peak <bytes>".
"""
import ctypes
import threading
import time

ROUNDS = 10
PEAK_ROUND = 4

try:
    dump = ctypes.CDLL(None).heapsample_dump
    dump.argtypes = [ctypes.c_char_p]
except AttributeError:
    dump = None

remembered = []
kept = []


def remember(round_number):
    for i in range(200):
        remembered.append(("r%d-%d " % (round_number, i)) * 250)


def build_report():
    blocks = [bytearray(1 << 20) for _ in range(24)]
    if dump:
        dump(None)
    time.sleep(0.02)
    return len(blocks)


def descend(depth):
    if depth == 0:
        kept.append(bytearray(256 * 1024))
        return 1
    return descend(depth - 1) + 1


def pool_work(kib):
    kept.append(bytearray(kib * 1024))


def main():
    descend(40)
    threads = [threading.Thread(target=pool_work, args=(k,)) for k in (64, 128, 192)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for round_number in range(ROUNDS):
        remember(round_number)
        if round_number == PEAK_ROUND:
            build_report()
        time.sleep(0.01)
        if dump:
            dump(None)
    print("leak %d rounds %d peak %d" % (200 * 2000, ROUNDS, 24 << 20))


main()
