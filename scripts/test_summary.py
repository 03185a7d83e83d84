#!/usr/bin/env python3
"""The closing lines of scripts/test.sh: what was skipped and why, what
failed, and `N passed, N failed, N skipped`.

Usage: test_summary.py [--run CARGO_TEST_LOG SKIP_LOG STATUS]... [--failed-step NAME]...

Each --run is one `cargo test` invocation: its output, the file its tests
appended their skips to (HEAPSAMPLE_SKIP_LOG, one line
`<test binary>\\t<test>\\t<reason>` per skip; see
tests/support/prerequisite.rs), and its exit status. libtest counts a
skipped test as passed, so a test with a skip record moves from passed to
skipped (a failed test stays failed); tests marked #[ignore] count as
skipped. A test binary that ends without its `test result:` line (it
crashed) is one failure, and so is a run that exits non-zero with no
failure counted (a build error). Each --failed-step (build, fmt, clippy,
doc, the benchmark smoke run) is one failure. Exits 1 if anything failed.
"""

import os
import re
import sys
from collections import defaultdict

RUNNING = re.compile(r"^\s+Running .*\((?:.*/)?([^/()]+)\)\s*$")
DOC_TESTS = re.compile(r"^\s+Doc-tests (\S+)")
TEST_LINE = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored)")
RESULT = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored")


def parse_run(log_path, skip_path, status):
    """(passed, failed, skipped, failure names, skip lines) of one run."""
    skips = defaultdict(dict)  # binary -> test -> reason
    try:
        with open(skip_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.rstrip("\n").split("\t", 2)
                if len(parts) == 3:
                    skips[parts[0]].setdefault(parts[1], parts[2])
    except FileNotFoundError:
        pass

    passed = failed = skipped = 0
    failures, skip_lines = [], []
    binary, seen_result, failed_tests = None, True, set()

    def close(binary, seen_result):
        nonlocal failed
        if binary is not None and not seen_result:
            failed += 1
            failures.append(f"{binary}: ended without a test result (crashed?)")

    with open(log_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            start = RUNNING.match(line) or DOC_TESTS.match(line)
            if start:
                close(binary, seen_result)
                binary, seen_result, failed_tests = start.group(1), False, set()
                if DOC_TESTS.match(line):
                    binary = "doc-tests " + binary
                continue
            test = TEST_LINE.match(line)
            if test and test.group(2) == "FAILED":
                failed_tests.add(test.group(1))
                failures.append(f"{binary}: {test.group(1)}")
                continue
            result = RESULT.match(line)
            if result:
                seen_result = True
                p, fl, ignored = map(int, result.groups())
                here = {
                    t: why
                    for t, why in skips.pop(binary, {}).items()
                    if t not in failed_tests
                }
                moved = min(len(here), p)
                passed += p - moved
                failed += fl
                skipped += ignored + len(here)
                skip_lines += [f"{binary}: {t}: {why}" for t, why in sorted(here.items())]
    close(binary, seen_result)
    if status != 0 and failed == 0:
        failed += 1
        run = os.path.basename(log_path).removesuffix(".log")
        failures.append(f"{run}: cargo test exited with status {status}, no test failed")
    # Skips of binaries whose results were not found (they crashed): shown
    # and counted, never hidden.
    for binary, tests in skips.items():
        skipped += len(tests)
        skip_lines += [f"{binary}: {t}: {why}" for t, why in sorted(tests.items())]
    return passed, failed, skipped, failures, skip_lines


def main(argv):
    runs, steps, i = [], [], 0
    while i < len(argv):
        if argv[i] == "--run" and i + 3 < len(argv):
            runs.append((argv[i + 1], argv[i + 2], int(argv[i + 3])))
            i += 4
        elif argv[i] == "--failed-step" and i + 1 < len(argv):
            steps.append(argv[i + 1])
            i += 2
        else:
            sys.exit(__doc__)
    passed = failed = skipped = 0
    failures, skip_lines = [], []
    for log_path, skip_path, status in runs:
        p, f, s, names, why = parse_run(log_path, skip_path, status)
        passed, failed, skipped = passed + p, failed + f, skipped + s
        failures += names
        skip_lines += why
    failed += len(steps)
    failures += [f"step: {step}" for step in steps]
    if skip_lines:
        print(f"== skipped ({len(skip_lines)})")
        print("\n".join(f"  {line}" for line in skip_lines))
    if failures:
        print(f"== failed ({len(failures)})")
        print("\n".join(f"  {line}" for line in failures))
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
