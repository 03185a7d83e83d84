//! Rust test program (built with plain `rustc`): Box, Vec, String, HashMap,
//! BTreeMap, Rc/Arc, threads with channels, a caught panic. Deterministic
//! stdout (a checksum and counts).
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ceb9fe1a85ec53);
    x ^ (x >> 33)
}

fn collections() -> u64 {
    let mut words: Vec<String> = (0..20_000u64).map(|i| format!("word-{}", mix(i) % 7919)).collect();
    words.sort();
    words.dedup();
    let mut counts: HashMap<String, Vec<u64>> = HashMap::new();
    for i in 0..20_000u64 {
        counts.entry(format!("k{}", i % 997)).or_default().push(i);
    }
    let ordered: BTreeMap<&String, usize> = counts.iter().map(|(k, v)| (k, v.len())).collect();
    let mut sum = words.len() as u64;
    for (k, v) in &ordered {
        sum = sum.wrapping_mul(31).wrapping_add(k.len() as u64 + *v as u64);
    }
    let boxes: Vec<Box<[u8]>> = (0..1000).map(|i| vec![i as u8; i % 300 + 1].into_boxed_slice()).collect();
    sum += boxes.iter().map(|b| b.len() as u64).sum::<u64>();
    let shared = Rc::new(vec![1u64; 100]);
    let clones: Vec<Rc<Vec<u64>>> = (0..10).map(|_| Rc::clone(&shared)).collect();
    sum += Rc::strong_count(&shared) as u64 + clones.len() as u64;
    println!("collections: words={} keys={}", words.len(), ordered.len());
    sum
}

fn threads() -> u64 {
    let (tx, rx) = mpsc::channel::<Vec<u64>>();
    let total = Arc::new(Mutex::new(0u64));
    let mut handles = Vec::new();
    for t in 0..8u64 {
        let tx = tx.clone();
        handles.push(thread::spawn(move || {
            for i in 0..2000u64 {
                let v: Vec<u64> = (0..(mix(t * 10_000 + i) % 64 + 1)).collect();
                tx.send(v).unwrap();
            }
        }));
    }
    drop(tx);
    let consumer = {
        let total = Arc::clone(&total);
        thread::spawn(move || {
            for v in rx {
                let s: u64 = v.iter().sum();
                *total.lock().unwrap() += s + v.len() as u64;
            }
        })
    };
    for h in handles {
        h.join().unwrap();
    }
    consumer.join().unwrap();
    let t = *total.lock().unwrap();
    println!("threads: total={t}");
    t
}

fn panics() -> u64 {
    std::panic::set_hook(Box::new(|_| {}));
    let mut caught = 0u64;
    for i in 0..50u64 {
        let r = std::panic::catch_unwind(|| {
            let v = vec![i; 100];
            if i % 5 == 0 {
                panic!("panic number {i} with {} elements", v.len());
            }
            v.len() as u64
        });
        caught += match r {
            Ok(n) => n,
            Err(payload) => payload.downcast_ref::<String>().map_or(1, |s| s.len() as u64),
        };
    }
    let _ = std::panic::take_hook();
    println!("panics: {caught}");
    caught
}

fn main() {
    let sum = collections()
        .wrapping_add(threads())
        .wrapping_add(panics());
    println!("checksum={sum}");
}
