#!/usr/bin/env python3
"""Instructions on the malloc/free fast paths, aarch64 beside x86_64.

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

Usage: python3 bench/aarch64.py [AARCH64_SO [X86_64_SO]]
(default: target-arm/aarch64-unknown-linux-gnu/release/libheapsample.so and
target/release/libheapsample.so). Needs aarch64-linux-gnu-objdump and
objdump (binutils, installed by scripts/test.sh with the cross compilers).
What a real aarch64 machine must confirm: cycles, not instructions (the
PIC loads through the GOT on aarch64 are dependent loads), and the
unwinder's cost per frame, which on aarch64 is libgcc's for now.
"""

import re
import subprocess
import sys
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


if __name__ == "__main__":
    main()
