#!/usr/bin/env bash
# Run each cargo-fuzz target for SECONDS (default 60) from the committed seed
# corpus (fuzz/seeds/<target>/) plus what earlier runs found (fuzz/corpus/,
# not committed). Needs a nightly toolchain and cargo-fuzz:
#   rustup toolchain install nightly && cargo install cargo-fuzz
# Crashes, ooms and timeouts land in fuzz/artifacts/<target>/; the script
# exits non-zero if any target found one. Extra arguments go to libFuzzer.
#
# Limits: 256 MB per allocation and 2 GB RSS (a small dump must never need
# more; the decoder's memory is meant to be proportional to its input),
# 10 s per input. FUZZ_JOBS=N runs N forked workers per target.
set -euo pipefail
seconds=${1:-60}
shift || true
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
toolchain=${FUZZ_TOOLCHAIN:-nightly}
export HEAPSAMPLE_FUZZ_SCRATCH=${HEAPSAMPLE_FUZZ_SCRATCH:-${TMPDIR:-/tmp}}
status=0
for target in decode prof_conf; do
    seeds=seeds/$target
    [ "$target" = decode ] && seeds=seeds/dump
    mkdir -p "corpus/$target" "artifacts/$target"
    cp -n "$seeds"/* "corpus/$target/" 2>/dev/null || true
    if [ "$target" = decode ]; then
        # Dumps the decoder must refuse with one line (a weight below 1).
        for f in seeds/dump-refused/*.prof; do
            cp -n "$f" "corpus/$target/refused-$(basename "$f")"
        done
        # Dumps of the previous format version, which the decoder converts.
        for f in seeds/dump-v2/*.prof; do
            cp -n "$f" "corpus/$target/v2-$(basename "$f")"
        done
        # The same dumps in the target's body mode (first byte odd, then the
        # body without its header): mutations then keep a valid CRC.
        for f in "$seeds"/*.prof; do
            { printf '\001'; tail -c +25 "$f"; } > "corpus/$target/body-$(basename "$f")"
        done
    fi
    before=$(ls "artifacts/$target" | wc -l)
    echo "== $target for ${seconds}s"
    jobs=()
    if [ -n "${FUZZ_JOBS:-}" ]; then
        jobs=(-fork="$FUZZ_JOBS" -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)
    fi
    cargo "+$toolchain" fuzz run --release --debug-assertions "$target" "corpus/$target" -- \
        -max_total_time="$seconds" -malloc_limit_mb=256 -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 -artifact_prefix="artifacts/$target/" "${jobs[@]}" "$@" \
        || status=1
    after=$(ls "artifacts/$target" | wc -l)
    if [ "$after" -gt "$before" ]; then
        echo "== $target: $((after - before)) new artifact(s) in fuzz/artifacts/$target:"
        ls -t "artifacts/$target" | head -n $((after - before))
        status=1
    fi
done
exit $status
