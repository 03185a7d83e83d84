#!/usr/bin/env bash
# The project's test command (README, CI). Installs what the tests need
# beyond gcc/g++/python3 (idempotently), builds everything in release mode,
# runs every test (and the lock-checking ones again under the debug shim),
# checks formatting, lints and documentation links, and runs the benchmark
# harness once in smoke mode so it never rots.
#
# Every prerequisite installed here is required: with
# HEAPSAMPLE_REQUIRE_PREREQUISITES=1 a test that finds one missing fails.
# A test that cannot run for want of a privilege or kernel facility is
# skipped, and says so in HEAPSAMPLE_SKIP_LOG (tests/support/prerequisite.rs).
# Every step runs even after a failure; the last line is
# `N passed, N failed, N skipped` (scripts/test_summary.py: a skipped test is
# not counted as passed, a failed step is one failure), and the exit status
# is non-zero if anything failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

need=()
dpkg -s libjemalloc2 >/dev/null 2>&1 || need+=(libjemalloc2)
command -v go >/dev/null 2>&1 || need+=(golang-go)
# heapdiff reads jemalloc and gperftools heap profiles: the tests compare it
# with jeprof (libjemalloc-dev) and google-pprof on files libtcmalloc wrote.
command -v jeprof >/dev/null 2>&1 || need+=(libjemalloc-dev)
command -v google-pprof >/dev/null 2>&1 || need+=(google-perftools)
dpkg -s libgoogle-perftools4 >/dev/null 2>&1 || need+=(libgoogle-perftools4)
command -v c++filt >/dev/null 2>&1 || need+=(binutils)
command -v heaptrack >/dev/null 2>&1 || need+=(heaptrack)
command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
{ command -v redis-benchmark && command -v musl-gcc && command -v capsh; } >/dev/null 2>&1 || need+=(redis-server redis-tools musl-tools libcap2-bin)
# Attach tests on idle servers: a PostgreSQL 15 cluster made by the test.
[ -x /usr/lib/postgresql/15/bin/initdb ] || need+=(postgresql)
# The viewer's tests drive a real browser through chromedriver.
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
# Runtime frames: Node.js (--perf-basic-prof) and the JVM (javac, jcmd).
[ -x /usr/bin/node ] || need+=(nodejs)
{ [ -x /usr/bin/javac ] && [ -x /usr/bin/jcmd ]; } || need+=(openjdk-17-jdk-headless)
# CPython's own test modules for tests/tests/suites.rs (Debian 12: 3.11).
python3 -c 'import test.test_dict, test.test_subprocess' >/dev/null 2>&1 \
    || /usr/bin/python3 -c 'import test.test_dict, test.test_subprocess' >/dev/null 2>&1 \
    || need+=(libpython3.11-testsuite)
if [ ${#need[@]} -gt 0 ]; then
    echo "== installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || exit 1
    apt-get install -y -qq "${need[@]}" >/dev/null || exit 1
fi

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
export HEAPSAMPLE_REQUIRE_PREREQUISITES=1
summary=()
step() { # step NAME COMMAND...: run it, remember a failure, go on
    local name=$1
    shift
    echo "== $name"
    "$@" || summary+=(--failed-step "$name")
}
tests() { # tests NAME CARGO-TEST-ARGS...: one cargo test run, counted
    local name=$1
    shift
    echo "== $name"
    HEAPSAMPLE_SKIP_LOG="$logs/$name.skips" cargo test "$@" 2>&1 | tee "$logs/$name.log"
    summary+=(--run "$logs/$name.log" "$logs/$name.skips" "${PIPESTATUS[0]}")
}

step "closing-line self-test" env PYTHONDONTWRITEBYTECODE=1 python3 scripts/test_summary_test.py
step build cargo build --release --workspace --all-targets
tests tests --release --workspace --no-fail-fast
# Lock order and the locks held and taken in hooks (spin_lock::enter_hook):
# end-to-end tests under the debug shim, whose checks abort on a violation.
step "debug shim" cargo build -p heapsample-shim
HEAPSAMPLE_SHIM="$root/target/debug/libheapsample.so" tests debug-shim --release \
    -p heapsample-tests --no-fail-fast \
    --test shim_fork --test fork_stress --test shim_threads --test hostile_threads \
    --test hostile_exit --test dlclose --test shim_exact --test shim_cxx --test signal_dumps \
    --test triggers --test dump_files --test shim_behaviour --test shim_edge \
    --test hostile_alloc_failure
step fmt cargo fmt --all -- --check
step clippy cargo clippy --release --workspace --all-targets -- -D warnings
# Every intra-doc link resolves, private items' docs included (so a link
# from a public item to a private one resolves too).
step "doc links" env RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links \
    -A rustdoc::private_intra_doc_links" \
    cargo doc --no-deps --workspace --document-private-items --quiet
step "benchmark smoke run" python3 bench/run.py --smoke
# Callgrind instructions per malloc/free pair (default, prof_exact, lg 0) and
# the C++ churn's lg 0 ratio against the committed bench/gate.json (not
# timed: the counts repeat run to run).
step "instruction gate" python3 bench/gate.py
# Every commit BENCHMARKS.md stamps its figures with is reachable from HEAD.
step "benchmark commits" python3 scripts/check_bench_commits.py
python3 scripts/test_summary.py "${summary[@]}"
