//! A known allocation history (objects with their site, size, birth and
//! death on a made-up clock) and the format-4 dumps a sampler with the
//! shim's law would write of it: each object sampled independently with
//! its inclusion probability (the countdown is memoryless), weighed by the
//! law, freed samples' lifetimes in their buckets, live samples with their
//! births. The truth of every time view follows from the history itself.

use heapsample_format::{
    Dump, LifetimeBucket, LiveSample, Process, SamplingLaw, Stack, Totals, Trigger, Weights,
    lifetime_bucket,
};

/// One object of the history.
#[derive(Clone, Copy, Debug)]
pub struct Object {
    /// Index of its site (a stack of its own).
    pub site: usize,
    pub size: u64,
    /// ns since the profiler's start.
    pub birth_ns: u64,
    /// None: live at the dump.
    pub death_ns: Option<u64>,
}

/// The sites of [`program`]: their leaf addresses (unmapped, so names are
/// the addresses) under one caller.
pub const SITES: [&str; 4] = ["startup", "temporary", "cache", "leak"];
pub const STARTUP: usize = 0;
pub const TEMPORARY: usize = 1;
pub const CACHE: usize = 2;
pub const LEAK: usize = 3;
const CALLER: u64 = 0x9000;
/// The run: the dump is taken 10 s after the start.
pub const RUN_NS: u64 = 10_000_000_000;
const TICK_NS: u64 = 200_000_000;
const TICKS: u64 = 40;
const FIRST_TICK_NS: u64 = 1_000_000_000;

/// The leaf address of site `site`.
pub fn site_address(site: usize) -> u64 {
    0x1000 * (site as u64 + 1)
}

/// The name heapdiff gives site `site` (an unmapped address).
pub fn site_name(site: usize) -> String {
    format!("{:#x}", site_address(site))
}

/// A start-up table (256 × 4 KiB in the first 0.5 s, kept), temporaries
/// (200 a tick, 64–512 B, lifetimes 1.5·2^k µs for k = 0..7, the middle of
/// a bucket each), a cache (24 × 1 KiB a tick into a ring of 96, the
/// oldest evicted: lifetimes 0.8 s) and a leak (6 × 2 KiB a tick, kept);
/// 40 ticks of 0.2 s from 1 s on, the dump at 10 s.
pub fn program() -> Vec<Object> {
    let mut objects = Vec::new();
    for i in 0..256u64 {
        objects.push(Object {
            site: STARTUP,
            size: 4096,
            birth_ns: 100_000_000 + i * 1_000_000,
            death_ns: None,
        });
    }
    let mut ring: Vec<usize> = Vec::new();
    for tick in 0..TICKS {
        let start = FIRST_TICK_NS + tick * TICK_NS;
        for i in 0..200u64 {
            let birth = start + i * 10_000;
            let lifetime = 1_500 << (i % 8);
            objects.push(Object {
                site: TEMPORARY,
                size: 64 + 64 * ((i + tick) % 8),
                birth_ns: birth,
                death_ns: Some(birth + lifetime),
            });
        }
        for i in 0..24u64 {
            let birth = start + 3_000_000 + i * 1_000;
            if ring.len() == 96 {
                let oldest = ring.remove(0);
                objects[oldest].death_ns = Some(birth);
            }
            ring.push(objects.len());
            objects.push(Object {
                site: CACHE,
                size: 1024,
                birth_ns: birth,
                death_ns: None,
            });
        }
        for i in 0..6u64 {
            objects.push(Object {
                site: LEAK,
                size: 2048,
                birth_ns: start + 5_000_000 + i * 1_000,
                death_ns: None,
            });
        }
    }
    objects
}

/// A small deterministic generator (splitmix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The dump a sampler of mean period 2^`lg` would write of `objects` at
/// `dump_ns` (objects born later are left out, deaths after it are live).
pub fn sampled_dump(objects: &[Object], lg: u32, dump_ns: u64, rng: &mut Rng) -> Dump {
    let period = 1u64 << lg;
    let law = SamplingLaw::new(period);
    let mut stacks: Vec<Stack> = (0..SITES.len())
        .map(|site| Stack {
            frames: vec![site_address(site), CALLER],
            thread: 1,
            ..Stack::default()
        })
        .collect();
    let mut live_samples = Vec::new();
    let mut totals = Totals::default();
    for object in objects.iter().filter(|o| o.birth_ns < dump_ns) {
        totals.allocations += 1;
        totals.bytes_allocated += object.size;
        if rng.next_f64() >= law.inclusion_probability(object.size) {
            continue;
        }
        totals.samples_taken += 1;
        let weights = law.weights(object.size);
        let stack = &mut stacks[object.site];
        stack.alloc_objects += 1;
        stack.alloc_bytes += object.size;
        stack.alloc = stack.alloc.plus(&weights);
        match object.death_ns.filter(|&d| d <= dump_ns) {
            Some(death) => add_freed(
                stack,
                lifetime_bucket(death - object.birth_ns),
                object.size,
                weights,
            ),
            None => {
                stack.live_objects += 1;
                stack.live_bytes += object.size;
                stack.live_usable_bytes += object.size;
                stack.live = stack.live.plus(&weights);
                totals.samples_live += 1;
                live_samples.push(LiveSample {
                    stack: object.site as u32,
                    thread: 1,
                    birth_ns: object.birth_ns,
                    size: object.size,
                    usable: object.size,
                });
            }
        }
    }
    live_samples.sort_by_key(|s| s.birth_ns);
    Dump {
        writer: "heapdiff-test".into(),
        pid: 4242,
        executable: "/time/program".into(),
        command_line: vec!["program".into()],
        time_unix_ns: 1_700_000_000_000_000_000 + dump_ns,
        trigger: Trigger::Final,
        seq: dump_ns / 1_000_000,
        lg_sample_period: lg,
        stacks,
        totals,
        process: Process {
            id: 0x5eed,
            parent_id: 0,
            start_monotonic_ns: 1_000_000_000_000,
            start_unix_ns: 1_700_000_000_000_000_000,
            dump_monotonic_ns: 1_000_000_000_000 + dump_ns,
            attach_unix_ns: None,
        },
        bytes_per_call: heapsample_format::BYTES_PER_CALL as u32,
        live_samples,
        ..heapsample_format::testing::dump()
    }
}

fn add_freed(stack: &mut Stack, bucket: usize, size: u64, weights: Weights) {
    let at = match stack
        .lifetimes
        .binary_search_by_key(&(bucket as u8), |b| b.bucket)
    {
        Ok(at) => at,
        Err(at) => {
            stack.lifetimes.insert(
                at,
                LifetimeBucket {
                    bucket: bucket as u8,
                    ..LifetimeBucket::default()
                },
            );
            at
        }
    };
    let entry = &mut stack.lifetimes[at];
    entry.samples += 1;
    entry.sampled_bytes += size;
    entry.weights = entry.weights.plus(&weights);
}
