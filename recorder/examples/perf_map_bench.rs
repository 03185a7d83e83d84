//! The dumper's cost of a perf map of 100,000 entries: parsing it (the map
//! changed since the last dump) and a dump with the map unchanged (cached),
//! each with 1,000 sampled stacks of 30 frames, 5 of them in the map.
//! `cargo run --release -p heapsample-recorder --example perf_map_bench`.

use heapsample_format::Stack;
use heapsample_recorder::runtime_names::runtime_frames;
use std::io::Write;
use std::time::Instant;

fn main() {
    let path = format!("/tmp/perf-{}.map", std::process::id());
    let entries = 100_000u64;
    let base = 0x7f00_0000_0000u64;
    let write = |generation: u64| {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&path).expect("map"));
        for i in 0..entries {
            writeln!(
                file,
                "{:x} 40 py::function_{i}_{generation}:/srv/app/module_{}.py",
                base + i * 0x40,
                i % 100
            )
            .expect("write");
        }
    };
    let stacks: Vec<Stack> = (0..1000u64)
        .map(|s| Stack {
            frames: (0..30u64)
                .map(|f| {
                    if f % 6 == 0 {
                        base + ((s * 31 + f) % entries) * 0x40 + 8
                    } else {
                        0x5555_0000 + f
                    }
                })
                .collect(),
            ..Stack::default()
        })
        .collect();
    let mut parse = Vec::new();
    let mut cached = Vec::new();
    for round in 0..11 {
        write(round);
        let started = Instant::now();
        let frames = runtime_frames(&stacks);
        parse.push(started.elapsed().as_secs_f64() * 1e3);
        assert!(!frames.symbols.is_empty());
        let started = Instant::now();
        let _ = runtime_frames(&stacks);
        cached.push(started.elapsed().as_secs_f64() * 1e3);
    }
    let _ = std::fs::remove_file(&path);
    parse.sort_by(f64::total_cmp);
    cached.sort_by(f64::total_cmp);
    println!(
        "100,000-entry perf map, 11 rounds: parse + lookup median {:.1} ms (min {:.1}, max {:.1}); unchanged map median {:.2} ms (min {:.2}, max {:.2})",
        parse[5], parse[0], parse[10], cached[5], cached[0], cached[10]
    );
}
