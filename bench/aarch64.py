#!/usr/bin/env python3
"""Instructions on the malloc/free fast paths and per unwound frame, aarch64
beside x86_64.

Under qemu-user only instruction counts mean anything (its timings are the
emulator's), and this qemu (Debian 12's 7.2) has no TCG plugins, so the
counts are read from the disassembly: every path from an export's entry to
its tail jump (an indirect `br`/`jmp *`), with its instruction count. The
fast path is the one that ends in the next allocator: for `malloc` the path
that counts the call (the longest; the shorter one is the crossing, which
jumps to the route), for `free` either (both are the same length).

The one-jump floor is `bench/tools/floor.c`: an export that loads the next
allocator's pointer, tests it and jumps (`mov; test; jz; jmp *`, four on
x86_64; the same on aarch64 is `adrp; ldr; cbz; br`, four): 8 per pair on
both, as `bench/gate.json`'s measured floor says for x86_64.

The walk's cost per frame is counted by qemu itself, for both architectures
the same way: `qemu-{aarch64,x86_64} -singlestep -d nochain,exec` logs one
line per guest instruction executed. `WALK_C` allocates (and frees) N times
at the bottom of a chain of D distinct functions with `lg_prof_sample:0`
(every allocation sampled, so every one walks the stack); the guest
instructions of a run with N = 101 minus those with N = 1, over 100, are one
warm sample's cost; the difference between two depths, over the depth
difference, is the cost per frame, after subtracting the same difference
without the profiler (the program's own calls). The first sample at each
depth computes every rule: its difference between the depths, over the depth
difference, is an uncached frame. Depths 2 and 10 keep the whole stack under
16 frames, where x86_64's walk does not use its memo (cached steps); 4 and 24
go over it (where both replay their memo).

Usage: python3 bench/aarch64.py [AARCH64_SO [X86_64_SO]]
(default: target-arm/aarch64-unknown-linux-gnu/release/libheapsample.so and
target/release/libheapsample.so). Needs aarch64-linux-gnu-objdump and
objdump (binutils, installed by scripts/test.sh with the cross compilers).
What a real aarch64 machine must confirm: cycles, not instructions (the
PIC loads through the GOT on aarch64 are dependent loads), and the
walk's cost per frame in cycles (its loads of the rule cache and of stack
slots miss or hit the data cache as the machine's caches and prefetchers
decide; qemu counts guest instructions only).
"""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLOOR = {"aarch64": 4, "x86_64": 4}


def disassemble(objdump, library, symbol):
    """[(address, mnemonic, operands)] of `symbol` in `library`."""
    text = subprocess.run(
        [objdump, "-d", "--no-show-raw-insn", f"--disassemble={symbol}", str(library)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    instructions = []
    for line in text.splitlines():
        match = re.match(r"\s+([0-9a-f]+):\s+(\S+)\s*(.*)", line)
        if match:
            address, mnemonic, operands = match.groups()
            instructions.append((int(address, 16), mnemonic, operands))
    if not instructions:
        sys.exit(f"{symbol} not found in {library}")
    return instructions


def branch(arch, mnemonic, operands):
    """('end'|'jump'|'cond'|None, target address or None)."""
    target = re.match(r"([0-9a-f]+)\s+<", operands)
    address = int(target.group(1), 16) if target else None
    if arch == "aarch64":
        if mnemonic in ("br", "ret"):
            return "end", None
        if mnemonic == "b":
            return "jump", address
        if mnemonic.startswith("b.") or mnemonic in ("cbz", "cbnz", "tbz", "tbnz"):
            address = int(re.search(r"([0-9a-f]+) <", operands).group(1), 16)
            return "cond", address
        return None, None
    if mnemonic in ("ret", "int3", "ud2") or (mnemonic == "jmp" and "*" in operands):
        return "end", None
    if mnemonic == "jmp":
        return "jump", address
    if mnemonic.startswith("j"):
        return "cond", address
    return None, None


def paths(arch, instructions):
    """Instruction counts of every path from the entry to a tail jump."""
    index = {address: at for at, (address, _, _) in enumerate(instructions)}
    found = []

    def walk(at, count, seen):
        while at < len(instructions):
            address, mnemonic, operands = instructions[at]
            if address in seen:
                return
            seen = seen | {address}
            count += 1
            kind, target = branch(arch, mnemonic, operands)
            if kind == "end":
                if mnemonic not in ("int3", "ud2"):
                    found.append(count)
                return
            if kind == "jump":
                at = index.get(target, len(instructions))
                continue
            if kind == "cond" and target in index:
                walk(index[target], count, seen)
            at += 1

    walk(0, 0, frozenset())
    return sorted(set(found))


WALK_C = r"""
#include <stdlib.h>
typedef void (*level_fn)(void);
static void *volatile sink;
__attribute__((noinline)) void f0(void) { sink = malloc(64); free(sink); }
#define LEVEL(k, j) __attribute__((noinline)) void f##k(void) { f##j(); __asm__ volatile("" ::: "memory"); }
LEVEL(1,0) LEVEL(2,1) LEVEL(3,2) LEVEL(4,3) LEVEL(5,4) LEVEL(6,5) LEVEL(7,6) LEVEL(8,7)
LEVEL(9,8) LEVEL(10,9) LEVEL(11,10) LEVEL(12,11) LEVEL(13,12) LEVEL(14,13) LEVEL(15,14)
LEVEL(16,15) LEVEL(17,16) LEVEL(18,17) LEVEL(19,18) LEVEL(20,19) LEVEL(21,20) LEVEL(22,21)
LEVEL(23,22)
static level_fn levels[] = {f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14,
                            f15, f16, f17, f18, f19, f20, f21, f22, f23};
int main(int argc, char **argv) {
  int depth = atoi(argv[1]), times = atoi(argv[2]);
  for (int i = 0; i < times; i++) levels[depth - 1]();
  return 0;
}
"""
SAMPLES = 100


def guest_instructions(arch, program, shim, depth, times, workdir):
    """Guest instructions qemu executes for `program depth times`."""
    log = Path(workdir) / "exec.log"
    command = [f"qemu-{arch}", "-singlestep", "-d", "nochain,exec", "-D", str(log)]
    if shim:
        command += ["-E", f"LD_PRELOAD={shim}"]
    env = dict(os.environ, PROF_CONF="lg_prof_sample:0")
    subprocess.run(command + [str(program), str(depth), str(times)], check=True, cwd=workdir, env=env)
    with open(log, "rb") as lines:
        return sum(1 for line in lines if line.startswith(b"Trace"))


def walk_costs(arch, compiler, shim):
    """(cached step, deep step, uncached frame): guest instructions per frame."""
    with tempfile.TemporaryDirectory() as workdir:
        program = Path(workdir) / "walk"
        subprocess.run([compiler, "-O2", "-fno-optimize-sibling-calls", "-o", str(program), "-x", "c", "-"],
                       input=WALK_C, text=True, check=True)

        def per_frame(low, high):
            count = {}
            for preload in (shim, None):
                for depth in (low, high):
                    for times in (1, SAMPLES + 1):
                        count[preload, depth, times] = guest_instructions(
                            arch, program, preload, depth, times, workdir)
            warm = {(p, d): (count[p, d, SAMPLES + 1] - count[p, d, 1]) / SAMPLES
                    for p in (shim, None) for d in (low, high)}
            step = (warm[shim, high] - warm[shim, low] - (warm[None, high] - warm[None, low])) / (high - low)
            first = (count[shim, high, 1] - count[shim, low, 1]
                     - (count[None, high, 1] - count[None, low, 1])) / (high - low)
            return step, first

        cached, _ = per_frame(2, 10)
        deep, uncached = per_frame(4, 24)
        return cached, deep, uncached


def main():
    arm = Path(sys.argv[1]) if len(sys.argv) > 1 else (
        ROOT / "target-arm/aarch64-unknown-linux-gnu/release/libheapsample.so")
    x86 = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "target/release/libheapsample.so"
    rows = []
    for arch, objdump, library in (
        ("x86_64", "objdump", x86),
        ("aarch64", "aarch64-linux-gnu-objdump", arm),
    ):
        counts = {f: paths(arch, disassemble(objdump, library, f)) for f in ("malloc", "free")}
        pair = max(counts["malloc"]) + max(counts["free"])
        floor = 2 * FLOOR[arch]
        rows.append((arch, counts, pair, floor))
    print("| arch | malloc paths | free paths | fast pair | one-jump floor pair | added |")
    print("|---|---|---|---:|---:|---:|")
    for arch, counts, pair, floor in rows:
        print(f"| {arch} | {counts['malloc']} | {counts['free']} | {pair} | {floor} | {pair - floor} |")
    print()
    print("| arch | cached step (depth 2 -> 10) | deep stack (4 -> 24) | uncached frame (first sample) |")
    print("|---|---:|---:|---:|")
    for arch, compiler, library in (("x86_64", "gcc", x86), ("aarch64", "aarch64-linux-gnu-gcc", arm)):
        cached, deep, uncached = walk_costs(arch, compiler, library)
        print(f"| {arch} | {cached:.1f} | {deep:.1f} | {uncached:,.0f} |")


if __name__ == "__main__":
    main()
