//! A Rust program leaking through `Vec` and `HashMap` under two of its own
//! functions, for the program-frame tests: `remember` inserts a 600-byte
//! `Vec<u8>` into a `HashMap` per tick, `hoard` pushes a 300-byte `String`
//! onto a `Vec`. 120 ticks, 2 ms apart, so the leak's births spread over
//! the run; the collections are leaked at exit (nothing freed).
use std::collections::HashMap;

#[inline(never)]
fn remember(map: &mut HashMap<u64, Vec<u8>>, tick: u64) {
    map.insert(tick, vec![tick as u8; 600]);
}

#[inline(never)]
fn hoard(kept: &mut Vec<String>, tick: u64) {
    kept.push("y".repeat(300 + (tick % 5) as usize));
}

fn main() {
    let map = Box::leak(Box::new(HashMap::new()));
    let kept = Box::leak(Box::new(Vec::new()));
    for tick in 0..120u64 {
        remember(map, tick);
        hoard(kept, tick);
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    println!("entries {} strings {}", map.len(), kept.len());
}
