//! Benchmark: nanoseconds per stack capture, fast unwinder (private, shared and layered
//! caches) vs libgcc's `_Unwind_Backtrace`, at chain depths 10, 30 and 100.
//!
//! ```text
//! cargo run --release -p heapsample-unwind --example capture_bench
//! ```
//!
//! Depth *d* means *d* distinct generated never-inlined functions (varied frame sizes)
//! above the capture, plus the runtime's frames below them; the "frames" column gives
//! the total. Rows:
//! - **warm**: median over 31 batches of 200 captures each (caches hot);
//! - **cold**: median of 301 single captures, each with every rule missing (private:
//!   `clear()` outside the timed region; shared and layered: `invalidate_all_caches()`
//!   before the capture, so the layered row includes clearing its 4 KiB private part);
//! - **fresh thread**: median over 41 new threads of the first capture on each (a new
//!   private cache per thread; the shared cache is process-wide and stays warm).

#[allow(dead_code)]
mod chain {
    include!(concat!(env!("OUT_DIR"), "/chain.rs"));
}

use std::hint::black_box;
use std::time::Instant;

use heapsample_unwind::{
    RuleCache, SharedRuleCache, capture, capture_layered, capture_libgcc, capture_shared,
    invalidate_all_caches,
};

const MAX_FRAMES: usize = 256;
const DEPTHS: [usize; 3] = [10, 30, 100];
const WARM_BATCHES: usize = 31;
const WARM_BATCH_SIZE: u32 = 200;
const COLD_SAMPLES: usize = 301;
const FRESH_THREADS: usize = 41;

static SHARED: SharedRuleCache = SharedRuleCache::new();

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    Private,
    Shared,
    Layered,
    Libgcc,
}

const METHODS: [Method; 4] = [
    Method::Private,
    Method::Shared,
    Method::Layered,
    Method::Libgcc,
];

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Private => "fast, private 64 KiB cache",
            Method::Shared => "fast, shared 256 KiB cache",
            Method::Layered => "fast, 4 KiB private + shared",
            Method::Libgcc => "libgcc _Unwind_Backtrace",
        }
    }
}

/// The caches one thread uses.
struct Caches {
    private: Box<RuleCache>,
    small: Box<RuleCache<64>>,
}

impl Caches {
    fn new() -> Self {
        Caches {
            private: <RuleCache>::new_boxed(),
            small: RuleCache::<64>::new_boxed(),
        }
    }

    #[inline(always)]
    fn capture(&mut self, method: Method, frames: &mut [u64]) -> usize {
        match method {
            Method::Private => capture(&mut self.private, frames),
            Method::Shared => capture_shared(&SHARED, frames),
            Method::Layered => capture_layered(&mut self.small, &SHARED, frames),
            Method::Libgcc => capture_libgcc(frames),
        }
    }

    fn make_cold(&mut self, method: Method) {
        match method {
            Method::Private => self.private.clear(),
            Method::Shared | Method::Layered => invalidate_all_caches(),
            Method::Libgcc => {}
        }
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Runs `leaf` at the bottom of a `depth`-function chain.
fn at_depth<T>(depth: usize, leaf: impl FnOnce() -> T) -> T {
    let mut leaf = Some(leaf);
    let mut result = None;
    chain::chain(depth, &mut || {
        result = Some((leaf.take().expect("leaf runs once"))());
        0
    });
    result.expect("leaf ran")
}

fn warm_ns(caches: &mut Caches, method: Method, depth: usize) -> f64 {
    at_depth(depth, || {
        let mut frames = [0u64; MAX_FRAMES];
        for _ in 0..WARM_BATCH_SIZE {
            black_box(caches.capture(method, &mut frames));
        }
        let batches = (0..WARM_BATCHES)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..WARM_BATCH_SIZE {
                    black_box(caches.capture(method, &mut frames));
                }
                start.elapsed().as_nanos() as f64 / f64::from(WARM_BATCH_SIZE)
            })
            .collect();
        median(batches)
    })
}

fn cold_ns(caches: &mut Caches, method: Method, depth: usize) -> f64 {
    at_depth(depth, || {
        let mut frames = [0u64; MAX_FRAMES];
        let samples = (0..COLD_SAMPLES)
            .map(|_| {
                caches.make_cold(method);
                let start = Instant::now();
                black_box(caches.capture(method, &mut frames));
                start.elapsed().as_nanos() as f64
            })
            .collect();
        median(samples)
    })
}

fn fresh_thread_ns(method: Method, depth: usize) -> f64 {
    let samples = (0..FRESH_THREADS)
        .map(|_| {
            std::thread::spawn(move || {
                let mut caches = Caches::new();
                at_depth(depth, || {
                    let mut frames = [0u64; MAX_FRAMES];
                    let start = Instant::now();
                    black_box(caches.capture(method, &mut frames));
                    start.elapsed().as_nanos() as f64
                })
            })
            .join()
            .expect("benchmark thread")
        })
        .collect();
    median(samples)
}

fn frames_at_depth(depth: usize) -> usize {
    at_depth(depth, || capture_libgcc(&mut [0u64; MAX_FRAMES]))
}

fn print_table(title: &str, measure: &mut dyn FnMut(Method, usize) -> f64) {
    println!("\n{title} (median ns per capture)\n");
    print!("| method |");
    for depth in DEPTHS {
        print!(" d{depth} ({} fr) |", frames_at_depth(depth));
    }
    println!("\n|---|---:|---:|---:|");
    for method in METHODS {
        print!("| {} |", method.name());
        for depth in DEPTHS {
            print!(" {:.0} |", measure(method, depth));
        }
        println!();
    }
}

fn main() {
    println!(
        "cache sizes: RuleCache (1024 buckets) {} B, RuleCache<64> {} B, SharedRuleCache (4096 buckets) {} B",
        RuleCache::<1024>::size_in_bytes(),
        RuleCache::<64>::size_in_bytes(),
        SharedRuleCache::<4096>::size_in_bytes(),
    );
    let mut caches = Caches::new();
    print_table("Warm", &mut |method, depth| {
        warm_ns(&mut caches, method, depth)
    });
    print_table("Cold rule cache", &mut |method, depth| {
        cold_ns(&mut caches, method, depth)
    });
    print_table("First capture on a fresh thread", &mut |method, depth| {
        fresh_thread_ns(method, depth)
    });
    println!(
        "\nfallbacks to libgcc in the private cache during this run: {}",
        caches.private.fallbacks()
    );
}
