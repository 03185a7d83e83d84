#!/usr/bin/env bash
# The project's test command (README, CI). Installs what the tests need
# beyond gcc/g++/python3 (idempotently), builds everything in release mode,
# runs every test, checks formatting and lints, and runs the benchmark
# harness once in smoke mode so it never rots.
set -euo pipefail
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
# The viewer's tests drive a real browser through chromedriver.
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
# CPython's own test modules for tests/tests/suites.rs (Debian 12: 3.11).
python3 -c 'import test.test_dict, test.test_subprocess' >/dev/null 2>&1 \
    || /usr/bin/python3 -c 'import test.test_dict, test.test_subprocess' >/dev/null 2>&1 \
    || need+=(libpython3.11-testsuite)
if [ ${#need[@]} -gt 0 ]; then
    echo "== installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
fi

echo "== build"
cargo build --release --workspace --all-targets
echo "== tests"
test_log=$(mktemp)
trap 'rm -f "$test_log"' EXIT
HEAPSAMPLE_REQUIRE_GO=1 cargo test --release --workspace --no-fail-fast 2>&1 | tee "$test_log"
echo "== lock order: end-to-end tests under the debug shim (lock ranks checked)"
cargo build -p heapsample-shim
HEAPSAMPLE_SHIM="$root/target/debug/libheapsample.so" cargo test --release -p heapsample-tests \
    --test shim_fork --test fork_stress --test shim_threads --test hostile_threads \
    --test hostile_exit --test dlclose --test shim_exact --test shim_cxx --test signal_dumps \
    2>&1 | tee -a "$test_log"
echo "== fmt and clippy"
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets -- -D warnings
echo "== benchmark smoke run"
python3 bench/run.py --smoke
# One closing line for the whole suite (cargo's last block is a doc-test
# crate with nothing to run).
awk '/^test result:/ { passed += $4; failed += $6 }
     END { printf "tests: %d passed, %d failed\n", passed, failed }' "$test_log"
