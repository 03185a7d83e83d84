#!/bin/bash
# Regenerate the seed dumps in fuzz/seeds/dump/ with the current shim (run
# after a dump format change; tests/tests/fuzz_bounded.rs checks that every
# seed decodes, re-encodes byte for byte and stays under 16 KiB). The dumps
# of the previous format versions are kept in fuzz/seeds/dump-v2/,
# fuzz/seeds/dump-v3/ and fuzz/seeds/dump-v4/ (written by the format-2, -3
# and -4 shims; they must keep loading).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p heapsample-shim
shim=$PWD/target/release/libheapsample.so
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=fuzz/seeds/dump

# seed name, PROF_CONF, command...
seed() {
    local name=$1 conf=$2
    shift 2
    rm -f "$work"/*
    LD_PRELOAD=$shim PROF_CONF="$conf,prof_prefix:$work/d" "$@" >/dev/null
    # The smallest dump the run wrote (interval runs write several).
    local file
    file=$(ls -S "$work"/*.prof | tail -1)
    cp "$file" "$out/$name.prof"
    echo "$name.prof: $(stat -c %s "$out/$name.prof") bytes"
}

seed true_final "" /usr/bin/true
seed ls_lg12 "lg_prof_sample:12" ls /
seed sort_exact_lg10 "prof_exact:true,lg_prof_sample:10" sort /etc/passwd
seed python_interval "lg_prof_interval:16,lg_prof_sample:14,prof_final:false" \
    python3 -c 'x = [str(i) for i in range(20000)]'
