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
# aarch64: Debian's cross toolchain, its Rust standard library for the
# target, the arm64 C and C++ runtimes (multiarch) and qemu-user
# (tests/tests/aarch64.rs).
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64 || exit 1
fi
for package in rustc-web cargo-web libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu \
    g++-aarch64-linux-gnu qemu-user libc6:arm64 libstdc++6:arm64; do
    dpkg -s "$package" >/dev/null 2>&1 || need+=("$package")
done
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

# What lies in the source tree outside the build directories, tracked or
# not: a test that writes into its working directory leaves a file here,
# which the "source tree unchanged" step at the end names.
stray_files() {
    git -C "$root" ls-files --others --exclude-standard --ignored --directory |
        grep -v -E '^(target|target-arm|bench/out)/' | sort
}
no_new_stray_files() {
    local new
    new=$(comm -13 "$logs/stray.before" <(stray_files))
    [ -z "$new" ] || { echo "files the suite left in the source tree:" "$new"; return 1; }
}
stray_files >"$logs/stray.before"

step "closing-line self-test" env PYTHONDONTWRITEBYTECODE=1 python3 scripts/test_summary_test.py
step build cargo build --release --workspace --all-targets
# The aarch64 shim, launcher and heapdiff, cross-built with Debian's rustc
# (the machine's rustup has no other target) into their own target directory.
# From cold about 300 CPU-seconds, nine tenths of them heapdiff's.
aarch64_target="$root/target-arm"
step "aarch64 build" env RUSTC=/usr/bin/rustc CARGO_TARGET_DIR="$aarch64_target" \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
    /usr/bin/cargo build --release --target aarch64-unknown-linux-gnu \
    -p heapsample-shim -p heapsample-cli -p heapdiff-cli
export HEAPSAMPLE_AARCH64_SHIM="$aarch64_target/aarch64-unknown-linux-gnu/release/libheapsample.so"
export HEAPSAMPLE_AARCH64_HEAPDIFF="$aarch64_target/aarch64-unknown-linux-gnu/release/heapdiff"
# The unwind crate's library tests on aarch64 (its walk, rule caches and memo
# against libgcc), run under qemu-user (without -L: qemu 7.2 hangs in
# pthread_create with it).
step "aarch64 unwind tests" env RUSTC=/usr/bin/rustc CARGO_TARGET_DIR="$aarch64_target" \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=qemu-aarch64 \
    /usr/bin/cargo test --release --target aarch64-unknown-linux-gnu -p heapsample-unwind --lib
# The ten-minute bounded dump series (tests/tests/dump_series_long.rs) sleeps
# most of its time: its binary runs in the background beside every other
# step (cargo would hold the build directory's lock for its ten minutes),
# and its log is counted at the end like a `tests` run's.
long_series=$(cargo test --release -p heapsample-tests --test dump_series_long --no-run 2>&1 |
    sed -n 's/^ *Executable .*(\(.*\))$/\1/p')
case $long_series in /*) ;; *) long_series="$root/$long_series" ;; esac
echo "== long-series (in the background): $long_series"
(
    cd "$root/tests" || exit 1
    echo "     Running tests/dump_series_long.rs ($long_series)"
    HEAPSAMPLE_SKIP_LOG="$logs/long-series.skips" "$long_series" dump_series_ten_minutes --exact
    echo $? >"$logs/long-series.status"
) >"$logs/long-series.log" 2>&1 &
long_series_pid=$!
tests tests --release --workspace --no-fail-fast -- --skip dump_series_ten_minutes
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
wait "$long_series_pid"
step "source tree unchanged" no_new_stray_files
echo "== long-series (its log)"
cat "$logs/long-series.log"
summary+=(--run "$logs/long-series.log" "$logs/long-series.skips" "$(cat "$logs/long-series.status" 2>/dev/null || echo 1)")
python3 scripts/test_summary.py "${summary[@]}"
