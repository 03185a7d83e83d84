//! The time views (lifetimes, temporary allocations, the age of live
//! memory, "born in a range and still live", leak / cache / start-up, leak
//! candidates, the peak) through the pipeline, on format-4 dumps of a known
//! history (`common::history`): a start-up table, temporaries, a cache
//! that fills and evicts, a slow leak.
//!
//! ## Exact at period 1
//!
//! Every object is sampled with weight 1 and no variance: every value must
//! equal the history's count, with a point interval.
//!
//! ## Unbiased at a sparse period, with calibrated intervals
//!
//! At period R = 2^12 an object of `s` bytes is sampled with probability
//! `p(s) = 1 − (1 − 1/R)^(s+1)`, independently of the others, and weighs
//! `1/p`. A cell (a site's lifetime bucket, age slice, temporary total) is
//! a Horvitz–Thompson sum: unbiased, with variance
//! `σ² = Σ_objects y²(1 − p)/p` (y = 1 or s), which the test computes from
//! the history, independently of the code under test. The mean of K runs
//! has standard error σ/√K and must lie within 4σ/√K of the truth (a false
//! failure 6·10⁻⁵ per cell; 60 cells: 0.4 %). Each cell's 95 % interval
//! must cover the truth in ≥ 90 % of runs: with a true coverage of 93 %
//! (the normal approximation on ~10 samples) and K = 800, the chance of
//! more than 80 misses in 800 is about 1e-4 per cell. The leak must be
//! classified accumulating, and the cache not, in ≥ 95 % of runs (the
//! leak's older half holds ~50 samples against ~40 in the newer, so a ratio
//! under 1/4 is a > 6σ event; the cache keeps nothing older than 0.8 s, so
//! never). The runs are simulated in process from a fixed seed: under a
//! second for the whole test, and the same outcome on every run, so it
//! cannot fail by chance in CI; the rates above are what a change of the
//! seed or of the sampling code's order of draws risks (60 cells at 4σ:
//! 0.4 %).

mod common;

use common::history::{
    CACHE, LEAK, Object, RUN_NS, Rng, SITES, STARTUP, TEMPORARY, program, sampled_dump, site_name,
};
use heapdiff::compare::ages::Trend;
use heapdiff::compare::ages::failing;
use heapdiff::compare::lifetimes::LifetimeRow;
use heapdiff::input::Input;
use heapdiff::model::{BirthRange, BuildOptions, Metric, TimePoint};
use heapdiff::pipeline::Series;
use heapdiff::pipeline::time::{
    self, allocated_between_and_live, leaks, lifetimes, live_ages, peak, require, series_peak,
};
use heapdiff::pipeline::{Loaded, Session, Settings};
use heapdiff::stats::{Class, Estimate, Sampling, Unit};
use heapdiff::symbols::LocationTable;
use heapsample_format::{Dump, LIFETIME_BUCKETS, Peak, SamplingLaw, VERSION, lifetime_bucket};
use std::collections::BTreeMap;
use std::path::PathBuf;

const SLICES: usize = 5;

fn input(dump: Dump, version: u32) -> Input {
    Input {
        path: PathBuf::from(format!("dump-{}", dump.seq)),
        dump,
        version,
        foreign: None,
    }
}

fn settings(born: BirthRange) -> Settings {
    Settings {
        build: BuildOptions {
            born,
            ..BuildOptions::default()
        },
        ..Settings::default()
    }
}

fn session(dump: Dump, born: BirthRange) -> Session {
    Session::open(
        LocationTable::default(),
        Loaded::one("d".into(), input(dump, VERSION)),
        None,
        &settings(born),
        &mut |_| {},
    )
    .expect("open")
}

/// The truth of a cell: its value and its sampling variance at `law`.
#[derive(Clone, Copy, Debug, Default)]
struct Truth {
    value: f64,
    variance: f64,
}

impl Truth {
    fn add(&mut self, law: SamplingLaw, size: u64, bytes: bool) {
        let y = if bytes { size as f64 } else { 1.0 };
        let p = law.inclusion_probability(size);
        self.value += y;
        self.variance += y * y * (1.0 - p) / p;
    }
}

/// Every cell's truth, keyed by a readable name.
fn truths(objects: &[Object], lg: u32) -> BTreeMap<String, Truth> {
    let law = SamplingLaw::new(1 << lg);
    let mut cells: BTreeMap<String, Truth> = BTreeMap::new();
    for o in objects {
        let name = SITES[o.site];
        match o.death_ns {
            Some(death) => {
                let bucket = lifetime_bucket(death - o.birth_ns);
                for (unit, bytes) in [("objects", false), ("bytes", true)] {
                    cells
                        .entry(format!("{name} freed bucket {bucket:02} {unit}"))
                        .or_default()
                        .add(law, o.size, bytes);
                    if bucket < 11 {
                        cells
                            .entry(format!("{name} temporary {unit}"))
                            .or_default()
                            .add(law, o.size, bytes);
                    }
                }
            }
            None => {
                let slice = (o.birth_ns as u128 * SLICES as u128 / RUN_NS as u128) as usize;
                cells
                    .entry(format!("{name} live born in slice {slice} bytes"))
                    .or_default()
                    .add(law, o.size, true);
                if (2_000_000_000..5_000_000_000).contains(&o.birth_ns) {
                    cells
                        .entry("all live born in [2 s, 5 s) bytes".to_string())
                        .or_default()
                        .add(law, o.size, true);
                }
            }
        }
    }
    cells
}

/// The same cells as estimated through the pipeline from `dump`.
fn estimates(dump: &Dump) -> (BTreeMap<String, Estimate>, BTreeMap<String, Class>) {
    let session = session(dump.clone(), BirthRange::default());
    let view = session.view();
    let site_of = |name: &str| (0..SITES.len()).find(|&s| site_name(s) == name);
    let mut cells = BTreeMap::new();
    let report = lifetimes(&view);
    for row in &report.functions {
        let Some(site) = site_of(&row.name) else {
            continue;
        };
        lifetime_cells(&mut cells, SITES[site], row);
    }
    let mut classes = BTreeMap::new();
    let ages = live_ages(&view, SLICES);
    for row in &ages.rows {
        let Some(site) = site_of(&row.name) else {
            continue;
        };
        classes.insert(SITES[site].to_string(), row.class);
        for (slice, amount) in row.slices.iter().enumerate() {
            if amount.bytes.value == 0.0 {
                continue;
            }
            cells.insert(
                format!("{} live born in slice {slice} bytes", SITES[site]),
                amount.bytes,
            );
        }
    }
    let range = allocated_between_and_live(&view, 2_000_000_000, 5_000_000_000);
    cells.insert("all live born in [2 s, 5 s) bytes".to_string(), range.bytes);
    (cells, classes)
}

fn lifetime_cells(cells: &mut BTreeMap<String, Estimate>, name: &str, row: &LifetimeRow) {
    for bucket in &row.buckets {
        let b = bucket.bucket;
        cells.insert(
            format!("{name} freed bucket {b:02} objects"),
            bucket.freed.objects,
        );
        cells.insert(
            format!("{name} freed bucket {b:02} bytes"),
            bucket.freed.bytes,
        );
    }
    if row.temporary.objects.value > 0.0 {
        cells.insert(format!("{name} temporary objects"), row.temporary.objects);
        cells.insert(format!("{name} temporary bytes"), row.temporary.bytes);
    }
}

#[test]
fn every_time_view_is_exact_at_period_one() {
    let objects = program();
    let dump = sampled_dump(&objects, 0, RUN_NS, &mut Rng(1));
    let truth = truths(&objects, 0);
    let (cells, classes) = estimates(&dump);
    let names: Vec<&String> = truth.keys().collect();
    assert_eq!(names, cells.keys().collect::<Vec<_>>(), "the same cells");
    for (name, truth) in &truth {
        let interval = cells[name].interval();
        assert_eq!(
            (interval.estimate, interval.low, interval.high),
            (truth.value, truth.value, truth.value),
            "{name}"
        );
    }
    assert_eq!(classes["leak"], Class::Accumulating);
    assert_eq!(classes["cache"], Class::RecentOnly);
    assert_eq!(classes["startup"], Class::Startup);
    // Temporary allocations as metrics of their own: 200 a tick, all freed
    // within 1 ms; the cache's evictions are not temporary.
    let session = session(dump.clone(), BirthRange::default());
    let profile = &session.view().new.profile;
    assert_eq!(profile.estimate(Metric::TempObjects).value, 8000.0);
    assert_eq!(
        profile.estimate(Metric::TempSpace).value,
        truth["temporary temporary bytes"].value
    );
    // --born-after 2s --born-before 5s: the in-use values are the range's.
    let born = BirthRange {
        after: Some(TimePoint::SinceStart(2_000_000_000)),
        before: Some(TimePoint::Unix(1_700_000_005_000_000_000)),
    };
    let ranged = session_with(dump, born);
    let ranged_profile = &ranged.view().new.profile;
    assert_eq!(
        ranged_profile.estimate(Metric::InuseSpace).value,
        truth["all live born in [2 s, 5 s) bytes"].value
    );
    // The whole profile stays the whole: every live byte, every metric.
    for metric in Metric::EVERY {
        assert_eq!(
            ranged_profile.whole_estimate(metric).value,
            profile.estimate(metric).value,
            "{metric:?}"
        );
    }
}

fn session_with(dump: Dump, born: BirthRange) -> Session {
    session(dump, born)
}

#[test]
fn leak_candidates_rank_the_leak_first_with_its_rate() {
    let objects = program();
    // One dump: from the births. The leak keeps 6 × 2 KiB per 0.2 s.
    let one = sampled_dump(&objects, 0, RUN_NS, &mut Rng(2));
    let series = open_series(vec![one]);
    let rows = leaks(&series);
    assert_eq!(rows[0].name, site_name(LEAK), "{rows:?}");
    let rate = 6.0 * 2048.0 / 0.2;
    // The kept rate counts the older half of the run after start-up
    // (1 s .. 5.5 s), of which the leak ran from 1 s on: exact at period 1.
    let older = rows[0].ages.as_ref().unwrap().windows.older.value;
    assert!((rows[0].rate.estimate - older / 4.5).abs() < 1e-9 * rate);
    assert!(
        (rows[0].rate.estimate - rate).abs() < 0.05 * rate,
        "{:?}",
        rows[0].rate
    );
    let names: Vec<&str> = failing(&rows, 0.0)
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(names, vec![site_name(LEAK)]);
    assert!(failing(&rows, 2.0 * rate).is_empty());
    // A series of dumps at 3, 5 and 7 s (given out of order): growth from
    // the first to the last, 20 ticks of the leak in 4 s.
    let dumps = [3u64, 7, 5]
        .iter()
        .map(|s| sampled_dump(&objects, 0, s * 1_000_000_000, &mut Rng(3)))
        .collect();
    let series = open_series(dumps);
    let rows = leaks(&series);
    assert_eq!(rows[0].name, site_name(LEAK));
    assert!(
        (rows[0].rate.estimate - rate).abs() < 1e-9 * rate,
        "exact growth over 4 s: {:?}",
        rows[0].rate
    );
    let growing: Vec<&str> = rows
        .iter()
        .filter(|r| r.rate.low > 0.0)
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(
        growing,
        vec![site_name(LEAK)],
        "the full cache does not grow"
    );
    assert_eq!(rows[0].trend, Some(Trend::Growing));
    // Dumps at 1.2, 2.5 and 5 s: the cache fills until 1.8 s, then levels
    // off; the leak goes on.
    let dumps = [1_200u64, 2_500, 5_000]
        .iter()
        .map(|ms| sampled_dump(&objects, 0, ms * 1_000_000, &mut Rng(3)))
        .collect();
    let rows = leaks(&open_series(dumps));
    let trend = |site: usize| {
        rows.iter()
            .find(|r| r.name == site_name(site))
            .and_then(|r| r.trend)
    };
    assert_eq!(trend(LEAK), Some(Trend::Growing), "{rows:?}");
    assert_eq!(trend(CACHE), Some(Trend::LevelledOff), "{rows:?}");
    assert_eq!(rows[0].name, site_name(LEAK));
    let names: Vec<&str> = failing(&rows, 0.0)
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(
        names,
        vec![site_name(LEAK)],
        "the cache filling up is no leak"
    );
}

fn open_series(dumps: Vec<Dump>) -> Series {
    let inputs = dumps.into_iter().map(|d| input(d, VERSION)).collect();
    time::open_series(
        LocationTable::default(),
        inputs,
        &Settings::default(),
        &mut |_| {},
    )
    .expect("series")
}

#[test]
fn the_peak_and_the_dump_nearest_to_it() {
    let objects = program();
    let mut dumps: Vec<Dump> = [3u64, 6, 9]
        .iter()
        .map(|s| sampled_dump(&objects, 0, s * 1_000_000_000, &mut Rng(4)))
        .collect();
    for dump in &mut dumps {
        dump.peak = Some(Peak {
            live_usable_bytes: 5_000_000,
            at_ns: 6_400_000_000,
            time_margin_bytes: 4096,
        });
    }
    dumps[0].peak.as_mut().unwrap().live_usable_bytes = 1_000_000;
    let series = open_series(dumps);
    let peak = series_peak(&series).expect("a peak");
    assert_eq!(peak.peak.live_usable_bytes, 5_000_000);
    assert_eq!(
        series.sides()[peak.nearest].profile.time.dump_ns,
        6_000_000_000
    );
    assert_eq!(peak.distance_ns, -400_000_000);
    let profiles: Vec<_> = series.sides().iter().map(|s| &s.profile).collect();
    assert_eq!(
        heapdiff::pipeline::time::peak(&profiles[..1])
            .unwrap()
            .nearest,
        0
    );
}

#[test]
fn dumps_without_births_or_lifetimes_say_what_they_lack() {
    let objects = program();
    let mut old = sampled_dump(&objects, 0, RUN_NS, &mut Rng(5));
    old.live_samples.clear();
    old.process = Default::default();
    for stack in &mut old.stacks {
        stack.lifetimes.clear();
    }
    let born = BirthRange {
        after: Some(TimePoint::SinceStart(1)),
        before: None,
    };
    let error = Session::open(
        LocationTable::default(),
        Loaded::one("old".into(), input(old.clone(), 3)),
        None,
        &settings(born),
        &mut |_| {},
    )
    .err()
    .expect("refused");
    let text = error.to_string();
    assert!(
        text.contains("--born-after/--born-before is not available: dump format 3 carries no lifetimes, temporary allocations, births"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1);
    let temp = Settings {
        metric: Metric::TempObjects,
        ..Settings::default()
    };
    let error = Session::open(
        LocationTable::default(),
        Loaded::one("old".into(), input(old.clone(), 3)),
        None,
        &temp,
        &mut |_| {},
    )
    .err()
    .expect("refused");
    assert!(
        error.to_string().contains("temp-objects is not available"),
        "{error}"
    );
    // The ordinary views still work, and the time views refuse with one line.
    let session = Session::open(
        LocationTable::default(),
        Loaded::one("old".into(), input(old, 3)),
        None,
        &Settings::default(),
        &mut |_| {},
    )
    .expect("a format-3 dump still loads");
    let view = session.view();
    assert!(view.new.profile.estimate(Metric::InuseSpace).value > 0.0);
    let error = require(&view, true, false, "the age report").unwrap_err();
    assert!(
        error
            .to_string()
            .contains("the age report is not available"),
        "{error}"
    );
    assert!(peak(&[&view.new.profile]).is_none());
}

#[test]
fn at_a_sparse_period_every_cell_is_unbiased_and_its_interval_calibrated() {
    const LG: u32 = 12;
    const RUNS: usize = 800;
    let objects = program();
    let truth = truths(&objects, LG);
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    let mut leak_accumulating = 0;
    let mut cache_accumulating = 0;
    let mut rng = Rng(0x7157);
    for _ in 0..RUNS {
        let dump = sampled_dump(&objects, LG, RUN_NS, &mut rng);
        let (cells, classes) = estimates(&dump);
        for (name, truth) in &truth {
            let unit = if name.ends_with("objects") {
                Unit::Objects
            } else {
                Unit::Bytes
            };
            let zero = Estimate::zero(Sampling::of(f64::from(1u32 << LG), unit));
            let estimate = cells.get(name).copied().unwrap_or(zero);
            let interval = estimate.interval();
            let entry = sums.entry(name.clone()).or_default();
            entry.0 += estimate.value;
            entry.1 += usize::from(interval.low <= truth.value && truth.value <= interval.high);
        }
        leak_accumulating += usize::from(classes.get("leak") == Some(&Class::Accumulating));
        cache_accumulating += usize::from(classes.get("cache") == Some(&Class::Accumulating));
    }
    let mut report = String::new();
    let mut failures = Vec::new();
    for (name, truth) in &truth {
        let (sum, covered) = sums[name];
        let mean = sum / RUNS as f64;
        let error = (truth.variance / RUNS as f64).sqrt();
        let z = if error > 0.0 {
            (mean - truth.value) / error
        } else {
            0.0
        };
        let coverage = covered as f64 / RUNS as f64;
        report.push_str(&format!(
            "{name}: truth {} mean {mean:.1} z {z:.2} coverage {coverage:.3}\n",
            truth.value
        ));
        if z.abs() > 4.0 || (error == 0.0 && mean != truth.value) {
            failures.push(format!("{name}: biased (z {z:.2})"));
        }
        if coverage < 0.90 {
            failures.push(format!("{name}: coverage {coverage:.3}"));
        }
    }
    let leak = leak_accumulating as f64 / RUNS as f64;
    let cache = cache_accumulating as f64 / RUNS as f64;
    report.push_str(&format!(
        "leak accumulating {leak:.3}, cache accumulating {cache:.3}\n"
    ));
    assert!(failures.is_empty(), "{failures:?}\n{report}");
    assert!(leak >= 0.95 && cache <= 0.05, "{report}");
    assert!(truth.len() >= 20, "{report}");
    let _ = (STARTUP, TEMPORARY, CACHE, LIFETIME_BUCKETS);
    eprintln!("{report}");
}

/// Writes the synthetic dumps for a look by hand:
/// `HEAPDIFF_WRITE_TIME_DUMPS=DIR cargo test --test time_views write`.
#[test]
fn write_synthetic_dumps_when_asked() {
    let Ok(dir) = std::env::var("HEAPDIFF_WRITE_TIME_DUMPS") else {
        return;
    };
    let objects = program();
    for (lg, seconds) in [(0u32, 10u64), (12, 10), (12, 5), (0, 3), (0, 7)] {
        let dump = sampled_dump(&objects, lg, seconds * 1_000_000_000, &mut Rng(9));
        let path = format!("{dir}/time.lg{lg}.{seconds}s.prof");
        std::fs::write(&path, heapsample_format::encode(&dump)).unwrap();
    }
}

#[test]
fn a_dump_listing_fewer_samples_than_its_stacks_count_reads_no_births() {
    // The recorder lists exactly the live samples its stacks count (both
    // come from one walk of the live table); a dump where they disagree is
    // not trusted for births, and its in-use values stay the recorder's sums.
    let objects = program();
    let mut dump = sampled_dump(&objects, 0, RUN_NS, &mut Rng(6));
    let full = dump.stacks.iter().map(|s| s.live.bytes).sum::<f64>();
    let whole = session(dump.clone(), BirthRange::default());
    assert!(whole.view().new.profile.time.births);
    dump.live_samples.pop().expect("a live sample");
    let short = session(dump, BirthRange::default());
    let profile = &short.view().new.profile;
    assert!(!profile.time.births);
    assert_eq!(profile.estimate(Metric::InuseSpace).value, full);
}

/// `count` objects of `size` bytes at `site`, born evenly over
/// `[from_ns, to_ns)`, each living `lifetime_ns` (None: kept).
fn evenly(
    site: usize,
    count: u64,
    from_ns: u64,
    to_ns: u64,
    lifetime_ns: Option<u64>,
) -> Vec<Object> {
    (0..count)
        .map(|i| {
            let birth_ns = from_ns + (to_ns - from_ns) * i / count;
            Object {
                site,
                size: 1024,
                birth_ns,
                death_ns: lifetime_ns.map(|l| birth_ns + l),
            }
        })
        .collect()
}

/// One dump's class states its evidence: a cache whose memory lives 1.5 s
/// of a 2 s run (longer than half of it) is read as accumulating, and
/// carries the caveat that its older half was born unevenly, with the
/// advice of a second dump; a steady leak over a 10 s run is accumulating
/// with strong evidence. A leak of a few objects carries the few-samples
/// caveat. Every object sampled (period 1), so the classes are exact.
#[test]
fn thin_evidence_carries_its_caveat() {
    let run = 2_000_000_000;
    // Live at the dump: born in [0.5 s, 2 s); the older half is [0.2 s,
    // 1.1 s), its first quarter [0.2 s, 0.65 s) holds 0.15 s of births
    // against 0.45 s in the second.
    let cache = evenly(CACHE, 2000, 0, run, Some(1_500_000_000));
    let few = evenly(LEAK, 12, 200_000_000, run, None);
    let objects: Vec<Object> = cache.into_iter().chain(few).collect();
    let dump = sampled_dump(&objects, 0, run, &mut Rng(7));
    let opened = session(dump, BirthRange::default());
    let ages = live_ages(&opened.view(), SLICES);
    let row = |site| {
        ages.rows
            .iter()
            .find(|r| r.name == site_name(site))
            .unwrap_or_else(|| panic!("{} in {ages:?}", site_name(site)))
    };
    let kinds = |site| -> Vec<&str> { row(site).caveats.iter().map(|c| c.kind()).collect() };
    assert_eq!(
        row(CACHE).class,
        Class::Accumulating,
        "the one-dump rule's blind spot"
    );
    assert_eq!(kinds(CACHE), ["uneven-births"]);
    let sentence = row(CACHE).caveats[0].sentence();
    assert!(
        sentence.contains("33 %") && sentence.contains("second dump"),
        "{sentence}"
    );
    // 12 objects over the run: 6 in the older half, 6 in the newer.
    assert_eq!(row(LEAK).class, Class::Accumulating);
    assert_eq!(kinds(LEAK), ["few-samples"]);

    // A steady leak over 10 s: even, and 1,000 samples in each half.
    let leak = evenly(LEAK, 2200, 0, 10_000_000_000, None);
    let dump = sampled_dump(&leak, 0, 10_000_000_000, &mut Rng(8));
    let opened = session(dump, BirthRange::default());
    let ages = live_ages(&opened.view(), SLICES);
    assert_eq!(ages.rows[0].class, Class::Accumulating);
    assert!(
        ages.rows[0].caveats.is_empty(),
        "{:?}",
        ages.rows[0].caveats
    );
}
