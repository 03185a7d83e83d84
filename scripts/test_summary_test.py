#!/usr/bin/env python3
"""Tests of test_summary.py's counting, on logs shaped like cargo test's
(run by scripts/test.sh before the suite)."""

import os
import tempfile
import unittest

from test_summary import parse_run

LOG = """\
     Running unittests src/lib.rs (target/release/deps/heapsample_format-0011)

running 2 tests
test codec::round_trip ... ok
test law::weights ... ok

test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s

     Running tests/memory_limit.rs (target/release/deps/memory_limit-aabb)

running 3 tests
test no_limit_is_one_warning ... ok
test pre_oom_dumps_in_a_v2_memory_cgroup ... ok
test pre_oom_dumps_in_a_v1_memory_cgroup ... FAILED

failures:
    pre_oom_dumps_in_a_v1_memory_cgroup

test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.7s

     Running tests/crashes.rs (target/release/deps/crashes-ccdd)

running 1 test
error: test failed, to rerun pass `-p heapsample-tests --test crashes`
   Doc-tests heapsample_format

running 1 test
test format/src/lib.rs - decode (line 3) ... ignored

test result: ok. 0 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s
"""

SKIPS = """\
memory_limit-aabb\tpre_oom_dumps_in_a_v2_memory_cgroup\tno v2 memory controller
memory_limit-aabb\tpre_oom_dumps_in_a_v1_memory_cgroup\tpartly skipped, then failed
memory_limit-aabb\tpre_oom_dumps_in_a_v2_memory_cgroup\trecorded twice
crashes-ccdd\tbefore_the_crash\tno root
"""


class ParseRun(unittest.TestCase):
    def parse(self, log, skips, status):
        with tempfile.TemporaryDirectory() as tmp:
            log_path = os.path.join(tmp, "tests.log")
            skip_path = os.path.join(tmp, "tests.skips")
            with open(log_path, "w") as f:
                f.write(log)
            if skips is not None:
                with open(skip_path, "w") as f:
                    f.write(skips)
            return parse_run(log_path, skip_path, status)

    def test_counts(self):
        passed, failed, skipped, failures, skip_lines = self.parse(LOG, SKIPS, 101)
        # 2 + 2 passed by libtest, one of them skipped; one failure, one
        # crashed binary; the v2 skip (once), the crashed binary's skip and
        # the ignored doc test.
        self.assertEqual((passed, failed, skipped), (3, 2, 3))
        self.assertIn("memory_limit-aabb: pre_oom_dumps_in_a_v1_memory_cgroup", failures)
        self.assertTrue(any(f.startswith("crashes-ccdd: ended without") for f in failures))
        self.assertEqual(len(skip_lines), 2)

    def test_no_skip_log(self):
        passed, failed, skipped, _, _ = self.parse(LOG, None, 101)
        self.assertEqual((passed, failed, skipped), (4, 2, 1))

    def test_build_error_is_a_failure(self):
        passed, failed, skipped, failures, _ = self.parse("error[E0308]: mismatched types\n", "", 101)
        self.assertEqual((passed, failed, skipped), (0, 1, 0))
        self.assertIn("exited with status 101", failures[0])


if __name__ == "__main__":
    unittest.main()
