#!/usr/bin/env bash
# Build everything, profile a real program (examples/leaky_cache.c) under
# libheapsample.so with interval dumps, render its heap as a flamegraph and
# as the interactive viewer, and end with the command that serves them all.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo build --release --workspace
target=${CARGO_TARGET_DIR:-$root/target}
demo="$target/demo"
mkdir -p "$demo"
rm -f "$demo"/heapsample.*.prof "$demo"/*.svg "$demo"/*.html
gcc -g -O1 -fno-omit-frame-pointer -o "$demo/leaky_cache" examples/leaky_cache.c
echo "== running examples/leaky_cache.c under the shim"
(cd "$demo" && LD_PRELOAD="$target/release/libheapsample.so" PROF_CONF=prof_leak:true,lg_prof_sample:16,lg_prof_interval:25 ./leaky_cache)
dump=$(ls "$demo"/heapsample.*.f.prof | head -n 1)
echo "== heapdiff $dump"
"$target/release/heapdiff" "$dump" --title "leaky_cache: live heap at exit" -o "$demo/leaky_cache.svg"
"$target/release/heapdiff" "$dump" --format text --top 8
"$target/release/heapdiff" "$dump" --format html -o "$demo/leaky_cache.html" --quiet
echo
echo "flamegraph: $demo/leaky_cache.svg"
echo "interactive viewer (one file): $demo/leaky_cache.html"
echo "browse the $(ls "$demo"/heapsample.*.prof | wc -l) dumps (timeline, flamegraphs, diffs); then open the printed URL:"
echo "  $target/release/heapdiff serve $demo"
