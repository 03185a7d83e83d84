//! The estimator against the truth: `tests/programs/estimator_sites.c`
//! allocates at sites that mix object sizes (many small + a few huge, two
//! spreads of sizes with some freed, churn of 32 B and 256 KiB blocks,
//! buffers grown by realloc), at the edges of what sampling can know (80
//! objects of 64 B: under one expected sample at lg 14; 48 of 1 KiB: about
//! three; three 1 MiB objects among a hundred 16-byte ones; realloc chains
//! ending in blocks every one of which is sampled, weight 1.0 after
//! smaller weights were added and subtracted; 64-byte objects adding up to
//! half and to one and a half times the detection limit), counts exactly
//! what it did and prints the size histograms behind its numbers. Every
//! site is one function with one allocation call, hence one call stack,
//! and the program allocates nothing else, so the sites add up to the
//! whole profile. A `new` version of the program grows one site by 40
//! objects of 64 B (a change on under one new sample at lg 14), one by
//! 8 MiB, and shrinks one.
//!
//! heapdiff's JSON report gives each function's (self) and stack's
//! estimate, its 95 % interval and its low-confidence mark, the total, the
//! detection limit, and for a pair of dumps each change with its interval.
//!
//! ## The truth's variance, from the sampling math
//!
//! The shim samples an allocation of `s` bytes with probability
//! `p(s) = 1 − (1 − 1/R)^(s + 1)` (a call counts its request and one byte
//! more), independently of every other allocation (the
//! countdown is memoryless). The Horvitz–Thompson estimate `Σ_sampled y/p`
//! (y = 1 for objects, s for bytes) is unbiased, with variance
//!
//! ```text
//! σ² = Σ_all objects y² (1 − p) / p
//! ```
//!
//! which the test computes from the program's histograms (independently of
//! the code under test), and `B = ln 20 / −ln(1 − 1/R)` bytes go unsampled
//! with probability at most 5 % (the detection limit, computed here too).
//!
//! ## What is checked, at lg_prof_sample 14 and 19, and how often it fails
//!
//! `RUNS` = 400 runs per period, each paired with a run of the new
//! version (independent processes): 400 pairs.
//!
//! - **Unbiased**: the mean of each function's and of the total's estimate
//!   (0 where absent) over the runs lies within 5.5 σ/√RUNS of the truth.
//!   σ is the truth's, not estimated, and the sum over the runs is close
//!   to a Poisson count of samples: a false failure per cell ≤ 2·10⁻⁷
//!   (exact Poisson sums from 100 effective samples on; 3.8·10⁻⁸, the
//!   normal's, on thousands), so ≤ 3·10⁻⁵ over the ≤ 150 cells (it was 5
//!   σ/√RUNS: 6·10⁻⁷ to 10⁻⁶ per cell, ~10⁻⁴ per run). Cells whose runs
//!   hold fewer than 100 effective samples (`RUNS · Y²/σ²`) have a mean
//!   too skewed for that bound and are left out of this check (not out of
//!   the next ones). σ/√RUNS is under 1 % of the truth on the cells
//!   checked (0.25–0.45 % on the sites of many samples), so a bias of 5 %
//!   fails them surely.
//! - **Coverage or mark**: every cell (function × metric, stack × metric,
//!   total × metric, change × metric) either covers the truth in at least
//!   `least_count(n, 0.95, 2·10⁻⁷)` of the n runs where it has at least
//!   one sample (355 of 400, 171 of 200, 81 of 100; the exact binomial
//!   tail), or carries the low-confidence mark in ≥ 90 % of the runs where
//!   it misses. Simulating the sampling of these histograms with
//!   heapdiff's interval (normal, its high end at least the gamma limit;
//!   4·10⁵ runs a cell), the one-stack sites' values cover 95.3–96.1 % at
//!   lg 14 and 95.5–99.9 % at 19, their changes between independent runs
//!   (the two intervals combined as heapdiff does) 95.3–99.97 %, and the
//!   normal approximation alone gives 84–89 % on the few-sample and mixed
//!   cells. So a cell fails with probability ≤ 2·10⁻⁷ (3·10⁻⁸ at 95.3 %),
//!   ≤ 5·10⁻⁵ per run over the ~230 unmarked cells, most far more
//!   conservative (it was ≥ 90 % of the runs: 1.4·10⁻⁵ per cell at 95 %,
//!   2·10⁻³ per run, and 0.19 for a cell present in 4 runs). A variance
//!   half the true one (coverage ~83 %) fails a cell present in 400 runs
//!   with probability 0.999 (200: 0.80); cells present in few runs are
//!   checked for their intervals' gross failures only (81 of 100, 12 of 20).
//! - **Detection limit**: a function absent from a report while its truth
//!   exceeds the printed limit happens in ≤ 5 % of the runs (its bytes go
//!   unsampled with probability ≤ 5 % exactly when they exceed the limit):
//!   the site at 1.5 times the limit is absent with probability
//!   0.05^1.5 = 1.1 %, so more than 20 of 400 such runs has probability
//!   below 10⁻⁹. The same for a change of a function absent from both
//!   dumps of a pair.
//! - **No float residue**: no change of zero width is significant in the
//!   400 pairs (zero-width changes arise from exactly known sides; the
//!   realloc chains' live objects are such), and those objects read as
//!   exactly 4 in every run (their float sum does not: 4.000000000000002
//!   in about one run in six).
//!
//! With `lg_prof_sample:0`, p = 1: every estimate must be exact, with a
//! point interval, and nothing marked.

use heapsample_tests::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const PERIODS: [u32; 2] = [14, 19];
const RUNS: usize = 400;
const METRICS: [&str; 4] = [
    "inuse-space",
    "inuse-objects",
    "alloc-space",
    "alloc-objects",
];

/// A site's exact numbers and sampling variances, per metric, and the
/// bytes behind each metric (live or allocated).
#[derive(Clone, Debug, Default)]
struct Truth {
    value: BTreeMap<&'static str, f64>,
    variance: BTreeMap<&'static str, f64>,
    bytes: BTreeMap<&'static str, f64>,
}

impl Truth {
    fn add(&mut self, other: &Truth) {
        for metric in METRICS {
            for (mine, theirs) in [
                (&mut self.value, &other.value),
                (&mut self.variance, &other.variance),
                (&mut self.bytes, &other.bytes),
            ] {
                *mine.entry(metric).or_insert(0.0) += theirs.get(metric).copied().unwrap_or(0.0);
            }
        }
    }
}

/// `p(s) = 1 − (1 − 1/R)^(s + 1)` (a call uses up its request plus one
/// byte of the countdown, so an empty request is sampled too), written out
/// here rather than taken from the code under test.
fn inclusion(size: f64, period: f64) -> f64 {
    if period <= 1.0 {
        return 1.0;
    }
    1.0 - (1.0 - 1.0 / period).powf(size + 1.0)
}

/// Bytes that go unsampled with probability 5 %: `(1 − 1/R)^B = 0.05`
/// (fewer do in more than one call: each call adds a unit).
fn detection_limit(period: f64) -> f64 {
    if period <= 1.0 {
        return 0.0;
    }
    20f64.ln() / -(-1.0 / period).ln_1p()
}

/// Parse `hist <site> <live|alloc> <size>x<count>...` lines into the truth
/// of every site for period `period`.
fn site_truths(stdout: &str, period: f64) -> BTreeMap<String, Truth> {
    let mut sites: BTreeMap<String, Truth> = BTreeMap::new();
    for line in stdout.lines() {
        let mut words = line.split_whitespace();
        if words.next() != Some("hist") {
            continue;
        }
        let site = words.next().expect("site name").to_string();
        let (space, objects) = match words.next().expect("live or alloc") {
            "live" => ("inuse-space", "inuse-objects"),
            "alloc" => ("alloc-space", "alloc-objects"),
            other => panic!("unknown histogram {other}"),
        };
        let truth = sites.entry(site).or_default();
        for metric in [space, objects] {
            for map in [&mut truth.value, &mut truth.variance, &mut truth.bytes] {
                map.entry(metric).or_insert(0.0);
            }
        }
        for bin in words {
            let (size, count) = bin.split_once('x').expect("size x count");
            let (size, count): (f64, f64) = (size.parse().unwrap(), count.parse().unwrap());
            let p = inclusion(size, period);
            let spread = (1.0 - p) / p;
            *truth.value.get_mut(space).unwrap() += count * size;
            *truth.value.get_mut(objects).unwrap() += count;
            *truth.variance.get_mut(space).unwrap() += count * size * size * spread;
            *truth.variance.get_mut(objects).unwrap() += count * spread;
            for metric in [space, objects] {
                *truth.bytes.get_mut(metric).unwrap() += count * size;
            }
        }
    }
    sites
}

/// The sum of every site: the whole profile.
fn whole(truths: &BTreeMap<String, Truth>) -> Truth {
    let mut sum = Truth::default();
    for truth in truths.values() {
        sum.add(truth);
    }
    sum
}

/// heapdiff's JSON report on `dump` (and `base`).
fn json_report(dump: &Path, base: Option<&Path>) -> Value {
    let mut command = Command::new(heapdiff_path());
    command.args(["-f", "json"]);
    if let Some(base) = base {
        command.arg("--base").arg(base);
    }
    let output = command.arg(dump).output().expect("run heapdiff");
    assert!(
        output.status.success(),
        "heapdiff failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("heapdiff's JSON parses")
}

/// One estimate or change: (estimate, low, high, low confidence).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Bound {
    estimate: f64,
    low: f64,
    high: f64,
    low_confidence: bool,
}

impl Bound {
    fn of(value: &Value) -> Bound {
        let get = |key: &str| {
            value[key]
                .as_f64()
                .unwrap_or_else(|| panic!("{key} in {value}"))
        };
        Bound {
            estimate: get("estimate"),
            low: get("low"),
            high: get("high"),
            low_confidence: value["low_confidence"]
                .as_bool()
                .unwrap_or_else(|| panic!("low_confidence in {value}")),
        }
    }

    fn covers(&self, truth: f64) -> bool {
        // 1e-9 relative: the float sums of an exact value.
        let slack = 1e-9 * truth.abs().max(1.0);
        self.low - slack <= truth && truth <= self.high + slack
    }
}

/// The self value of `function` for `metric`, None when the report does
/// not name it.
fn self_bound(report: &Value, metric: &str, function: &str) -> Option<Bound> {
    report["metrics"][metric]["functions"]
        .as_array()
        .expect("functions")
        .iter()
        .find(|f| f["name"] == function)
        .map(|f| Bound::of(&f["self"]))
}

/// The self change of `function` for `metric` in a diff report, and
/// whether it is significant; None when the report lists no change.
fn self_change(report: &Value, metric: &str, function: &str) -> Option<(Bound, bool)> {
    report["metrics"][metric]["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .find(|c| c["name"] == function)
        .map(|c| {
            let d = &c["delta"]["self"];
            (Bound::of(d), d["significant"].as_bool().unwrap())
        })
}

fn program() -> Program {
    compile_c("estimator_sites.c", &BuildOptions::no_pie())
}

/// One run of the program (`new`: its new version) under the shim at `lg`.
fn sites_outcome(program: &Program, lg: u32, new: bool) -> Outcome {
    let limit = detection_limit((1u64 << lg) as f64);
    let mut run = Run::program(program)
        .args(["sites", &format!("{limit}")])
        .with_shim()
        .prof_conf(format!("lg_prof_sample:{lg}"));
    if new {
        run = run.arg("new");
    }
    let outcome = run.run();
    outcome.assert_success();
    outcome
}

/// [`sites_outcome`], its stdout and heapdiff's report on its exit dump
/// (the run owns the dump file).
fn sites_run(program: &Program, lg: u32, new: bool) -> (String, Value, Outcome) {
    let outcome = sites_outcome(program, lg, new);
    let report = json_report(&outcome.final_dump().0.path, None);
    (outcome.stdout.clone(), report, outcome)
}

#[test]
fn every_allocation_sampled_is_exact() {
    let program = program();
    let (stdout, report, _run) = sites_run(&program, 0, false);
    let truths = site_truths(&stdout, 1.0);
    assert_eq!(truths.len(), 15, "{stdout}");
    let total = whole(&truths);
    for metric in METRICS {
        let exact = |bound: Option<Bound>, expected: f64, what: &str| {
            let bound = bound.unwrap_or(Bound {
                estimate: 0.0,
                low: 0.0,
                high: 0.0,
                low_confidence: false,
            });
            assert!(
                bound.estimate == expected
                    && bound.low == expected
                    && bound.high == expected
                    && !bound.low_confidence,
                "{what} {metric}: {bound:?}, exact {expected}"
            );
        };
        for (site, truth) in &truths {
            exact(self_bound(&report, metric, site), truth.value[metric], site);
        }
        let metric_report = &report["metrics"][metric];
        exact(
            Some(Bound::of(&metric_report["total"])),
            total.value[metric],
            "total",
        );
        for stack in metric_report["stacks"].as_array().unwrap() {
            let truth = &truths[stack_leaf(&report, stack)];
            exact(Some(Bound::of(stack)), truth.value[metric], "stack");
        }
        assert_eq!(metric_report["detection_limit"]["value"], 0.0);
    }
}

/// The leaf function's name of a metric's stack entry of the JSON report
/// (its `stack` indexes the report's `stacks`, whose frames, root first,
/// index `names`).
fn stack_leaf<'a>(report: &'a serde_json::Value, entry: &serde_json::Value) -> &'a str {
    let stack = &report["stacks"][entry["stack"].as_u64().unwrap() as usize];
    let leaf = stack.as_array().unwrap().last().unwrap().as_u64().unwrap();
    report["names"][leaf as usize].as_str().unwrap()
}

/// What one cell (a function, stack, the total or a change, for one
/// metric) did over the runs.
#[derive(Clone, Debug, Default)]
struct Cell {
    truth: f64,
    sigma: f64,
    /// Runs (or pairs) where it had at least one sample.
    present: usize,
    covered: usize,
    misses: usize,
    marked_misses: usize,
    /// Runs where it was absent while its truth exceeded the limit.
    absent_over_limit: usize,
    /// Sum of the estimates (0 where absent), for the bias check.
    sum: f64,
}

impl Cell {
    fn observe(&mut self, bound: Bound, truth: f64) {
        self.present += 1;
        self.sum += bound.estimate;
        if bound.covers(truth) {
            self.covered += 1;
        } else {
            self.misses += 1;
            self.marked_misses += usize::from(bound.low_confidence);
        }
    }

    /// Covers in at least `least_count(present, 0.95, 2e-7)` of the runs
    /// with samples (a false failure ≤ 2·10⁻⁷ for an interval covering
    /// ≥ 95 %), or is marked in ≥ 90 % of those where it misses.
    fn holds(&self) -> bool {
        self.covered >= least_count(self.present, 0.95, 2e-7)
            || self.marked_misses * 10 >= self.misses * 9
    }
}

type Cells = BTreeMap<(&'static str, String, &'static str), Cell>;

/// One job: a base run, a run of the new version, and the comparison of
/// the two.
struct Job {
    stdout: String,
    report: Value,
    new_stdout: String,
    diff: Value,
}

fn job(program: &Program, lg: u32) -> Job {
    let (stdout, report, base) = sites_run(program, lg, false);
    let new = sites_outcome(program, lg, true);
    let diff = json_report(&new.final_dump().0.path, Some(&base.final_dump().0.path));
    Job {
        stdout,
        report,
        new_stdout: new.stdout.clone(),
        diff,
    }
}

/// The runs of one period into cells; the failures of the checks that are
/// run by run (whole numbers, zero-width changes) go to `failures`.
fn cells_of(jobs: &[Job], period: f64, failures: &mut Vec<String>) -> Cells {
    let mut cells = Cells::new();
    let limit = detection_limit(period);
    let truths = site_truths(&jobs[0].stdout, period);
    let total = whole(&truths);
    let mut zero_width = 0;
    for (index, job) in jobs.iter().enumerate() {
        assert_eq!(job.stdout, jobs[0].stdout, "the program is deterministic");
        for metric in METRICS {
            let metric_report = &job.report["metrics"][metric];
            let printed = metric_report["detection_limit"]["bytes"].as_f64().unwrap();
            assert!(
                (printed / limit - 1.0).abs() < 1e-9,
                "limit {printed}, expected {limit}"
            );
            for (site, truth) in &truths {
                let cell = cells.entry(("function", site.clone(), metric)).or_default();
                (cell.truth, cell.sigma) = (truth.value[metric], truth.variance[metric].sqrt());
                match self_bound(&job.report, metric, site) {
                    Some(bound) => cell.observe(bound, truth.value[metric]),
                    None => cell.absent_over_limit += usize::from(truth.bytes[metric] > limit),
                }
            }
            let cell = cells.entry(("total", String::new(), metric)).or_default();
            (cell.truth, cell.sigma) = (total.value[metric], total.variance[metric].sqrt());
            cell.observe(Bound::of(&metric_report["total"]), total.value[metric]);
            for stack in metric_report["stacks"].as_array().unwrap() {
                let leaf = stack_leaf(&job.report, stack);
                let Some(truth) = truths.get(leaf) else {
                    failures.push(format!(
                        "run {index}: a stack the program does not account for: {stack}"
                    ));
                    continue;
                };
                let cell = cells
                    .entry(("stack", leaf.to_string(), metric))
                    .or_default();
                cell.truth = truth.value[metric];
                cell.observe(Bound::of(stack), truth.value[metric]);
            }
        }
        // Whole numbers: 4 live blocks, each sampled with p = 1 (weight 1).
        let chain = self_bound(&job.report, "inuse-objects", "chain_step");
        if chain.map(|b| (b.estimate, b.low, b.high)) != Some((4.0, 4.0, 4.0)) {
            failures.push(format!(
                "run {index}: chain_step's live objects read {chain:?}, not 4"
            ));
        }
        let new_truths = site_truths(&job.new_stdout, period);
        zero_width += pair_cells(
            &mut cells,
            &truths,
            &new_truths,
            &job.report,
            &job.diff,
            limit,
            failures,
        );
    }
    if zero_width == 0 {
        failures.push("no zero-width change was seen: the residue check checked nothing".into());
    }
    cells
}

/// The changes of one pair into cells; returns how many zero-width
/// changes it had (every one of them must be insignificant).
fn pair_cells(
    cells: &mut Cells,
    base: &BTreeMap<String, Truth>,
    new: &BTreeMap<String, Truth>,
    base_report: &Value,
    diff: &Value,
    limit: f64,
    failures: &mut Vec<String>,
) -> usize {
    let mut zero_width = 0;
    for metric in METRICS {
        let metric_report = &diff["metrics"][metric];
        for change in metric_report["changes"].as_array().unwrap() {
            for side in ["self", "total"] {
                let d = &change["delta"][side];
                let (bound, significant) = (Bound::of(d), d["significant"].as_bool().unwrap());
                if bound.low == bound.high {
                    zero_width += 1;
                    if significant {
                        failures.push(format!("a zero-width significant change: {change}"));
                    }
                }
            }
        }
        let delta = |truths: &BTreeMap<String, Truth>| whole(truths).value[metric];
        let cell = cells.entry(("change", "total".into(), metric)).or_default();
        cell.truth = delta(new) - delta(base);
        cell.observe(Bound::of(&metric_report["delta"]), cell.truth);
        for (site, new_truth) in new {
            let base_value = base.get(site).map_or(0.0, |t| t.value[metric]);
            let truth = new_truth.value[metric] - base_value;
            let cell = cells.entry(("change", site.clone(), metric)).or_default();
            cell.truth = truth;
            if let Some((bound, _)) = self_change(diff, metric, site) {
                cell.observe(bound, truth);
                continue;
            }
            // Not listed: absent from both dumps (a function absent from
            // one only has changed), or known not to have changed.
            if self_bound(base_report, metric, site).is_none() {
                let bytes =
                    new_truth.bytes[metric] - base.get(site).map_or(0.0, |t| t.bytes[metric]);
                cell.absent_over_limit += usize::from(bytes.abs() > limit);
            } else {
                let zero = Bound {
                    estimate: 0.0,
                    low: 0.0,
                    high: 0.0,
                    low_confidence: false,
                };
                cell.observe(zero, truth);
            }
        }
    }
    zero_width
}

/// Sampling at lg 14 and 19: unbiased, intervals that cover or say they
/// cannot, the detection limit, no float residue (see the module
/// documentation for each bound and its false-failure rate).
#[test]
fn sparse_periods_are_unbiased_and_intervals_cover_or_are_marked() {
    let program = program();
    let mut failures = Vec::new();
    let mut table = String::new();
    for lg in PERIODS {
        let period = (1u64 << lg) as f64;
        let jobs = in_parallel(RUNS, |_| job(&program, lg));
        let cells = cells_of(&jobs, period, &mut failures);
        for ((kind, name, metric), cell) in &cells {
            let runs = RUNS;
            table.push_str(&format!(
                "  lg {lg} {kind} {name} {metric}: truth {:.0}, present {}/{runs}, covered {}, misses {} (marked {}), absent over the limit {}",
                cell.truth, cell.present, cell.covered, cell.misses, cell.marked_misses, cell.absent_over_limit
            ));
            if *kind == "function" || *kind == "total" {
                let mean = cell.sum / RUNS as f64;
                let standard_error = cell.sigma / (RUNS as f64).sqrt();
                let effective_samples =
                    RUNS as f64 * cell.truth * cell.truth / (cell.sigma * cell.sigma).max(1e-300);
                table.push_str(&format!(
                    ", mean {mean:.0} ({:+.2} SE)",
                    (mean - cell.truth) / standard_error.max(1e-9)
                ));
                if effective_samples >= 100.0
                    && (mean - cell.truth).abs() > 5.5 * standard_error + 1e-9 * cell.truth.max(1.0)
                {
                    failures.push(format!(
                        "lg {lg} {name} {metric}: mean {mean:.0} is more than 5.5 standard errors ({standard_error:.0}) from the truth {:.0}",
                        cell.truth
                    ));
                }
            }
            table.push('\n');
            if !cell.holds() {
                failures.push(format!(
                    "lg {lg} {kind} {name} {metric}: covered {} of {} runs with samples, marked in {} of its {} misses",
                    cell.covered, cell.present, cell.marked_misses, cell.misses
                ));
            }
            if cell.absent_over_limit * 20 > runs {
                failures.push(format!(
                    "lg {lg} {kind} {name} {metric}: absent with a truth over the detection limit in {} of {runs} runs",
                    cell.absent_over_limit
                ));
            }
        }
        // The edges are there: the rare site is absent in some runs and
        // present in others, the tiny objects' count is marked.
        let rare = &cells[&("function", "site_rare".to_string(), "inuse-space")];
        if lg == 14 {
            assert!(rare.present > 0 && rare.present < RUNS, "{rare:?}");
        }
        let tiny = &cells[&(
            "function",
            "site_tiny_among_huge".to_string(),
            "inuse-objects",
        )];
        assert!(
            tiny.misses > 0 && tiny.marked_misses == tiny.misses,
            "{tiny:?}"
        );
    }
    eprintln!("estimates over {RUNS} runs and as many pairs per period:\n{table}");
    assert!(failures.is_empty(), "{failures:#?}\n{table}");
}

// ---------------------------------------------------------------------------
// Differences between two dumps of one process, and the CI gate

const DIFF_LG: u32 = 16;
const DIFF_PAIRS: usize = 40;

/// Run `estimator_sites diff <grow>`: the program's stdout and the paths
/// of its two dumps (kept alive by the returned outcome).
fn diff_run(program: &Program, grow: u64) -> (Outcome, std::path::PathBuf, std::path::PathBuf) {
    let outcome = Run::program(program)
        .args(["diff", &grow.to_string(), "a.prof", "b.prof"])
        .with_shim()
        .prof_conf(format!("lg_prof_sample:{DIFF_LG},prof_final:false"))
        .run();
    outcome.assert_success();
    let a = outcome.dir.path().join("a.prof");
    let b = outcome.dir.path().join("b.prof");
    (outcome, a, b)
}

/// `heapdiff --base a b -f text --fail-if-grows <threshold>`: exit status
/// and stderr.
fn gate(a: &Path, b: &Path, threshold: &str) -> (i32, String) {
    let output = Command::new(heapdiff_path())
        .args(["-f", "text", "--fail-if-grows", threshold, "--base"])
        .arg(a)
        .arg(b)
        .output()
        .expect("run heapdiff");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The change of `function`'s self `metric` in a diff report: (estimate,
/// low, high, significant), zeros when the report lists no change.
fn change_or_zero(report: &Value, metric: &str, function: &str) -> (f64, f64, f64, bool) {
    self_change(report, metric, function).map_or((0.0, 0.0, 0.0, false), |(b, significant)| {
        (b.estimate, b.low, b.high, significant)
    })
}

/// No growth at `site_steady` between the dumps: its in-use change must be
/// flagged in at most 10 % of the pairs (the in-use change's interval is
/// conservative, var(new) + var(base), though the two dumps share their
/// samples: in practice never); its cumulative numbers did not change at
/// all (the later dump of the process holds exactly the earlier samples): a
/// change of exactly 0, not significant. The churn between the dumps is a
/// known cumulative growth, judged on the samples taken in between alone
/// (the dumps are paired same-process by their process id): unbiased (mean
/// within 5 standard errors of the truth, σ² = Σ y²(1 − p)/p over the
/// allocations made between the dumps, whose 32-byte objects, holding
/// the variance, give ~50 samples a pair, 2,000 over the pairs: a false
/// failure 5.7·10⁻⁷; σ/√40 is 0.04 % of the truth, so a bias of 1 % fails
/// surely) and its interval covers the truth in ≥ 80 % of pairs. That
/// interval covers in 96.2 % of pairs (simulated: 4·10⁵ pairs of the
/// sampling of the churn's 625 objects of 256 KiB and 100,000 of 32 B, the
/// interval computed as heapdiff does), so a false failure is
/// P(Bin(40, 0.962) < 32) = 1.6·10⁻⁵ (1.3·10⁻⁴ were it exactly 95 %); a
/// variance half the true one fails it with probability 0.23 only: the
/// calibration is the sparse-period test's, this checks the pairing. The
/// gate passes, and says the most growth its interval leaves possible,
/// which is above the true change (0).
#[test]
fn no_growth_is_not_flagged() {
    let program = program();
    let period = (1u64 << DIFF_LG) as f64;
    let pairs = in_parallel(DIFF_PAIRS, |_| {
        let (outcome, a, b) = diff_run(&program, 0);
        let report = json_report(&b, Some(&a));
        let gate = gate(&a, &b, "1MB");
        (outcome.stdout.clone(), report, gate)
    });
    let truths = site_truths(&pairs[0].0, period);
    // The two churn calls are identical: half of the cumulative histogram
    // was allocated between the dumps.
    let churn_delta = truths["site_churn"].value["alloc-space"] / 2.0;
    let churn_sigma = (truths["site_churn"].variance["alloc-space"] / 2.0).sqrt();
    let mut flagged = 0;
    let mut churn_covered = 0;
    let mut churn_sum = 0.0;
    for (_, report, (gate_status, gate_message)) in &pairs {
        assert_eq!(report["pairing"], "same-process");
        assert_eq!(*gate_status, 0, "--fail-if-grows 1MB failed without growth");
        let most: f64 = gate_message
            .split("no growth above ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("the pass names no bound: {gate_message}"));
        assert!(most > 0.0, "{gate_message}");
        let space = change_or_zero(report, "inuse-space", "site_steady");
        let objects = change_or_zero(report, "inuse-objects", "site_steady");
        flagged += usize::from(space.3 || objects.3);
        for metric in ["alloc-space", "alloc-objects"] {
            let change = change_or_zero(report, metric, "site_steady");
            assert!(
                change.0 == 0.0 && !change.3,
                "{metric} of site_steady: {change:?}"
            );
        }
        let churn = change_or_zero(report, "alloc-space", "site_churn");
        churn_sum += churn.0;
        churn_covered += usize::from(churn.1 <= churn_delta && churn_delta <= churn.2);
    }
    let mean = churn_sum / DIFF_PAIRS as f64;
    let standard_error = churn_sigma / (DIFF_PAIRS as f64).sqrt();
    eprintln!(
        "site_steady flagged in {flagged} of {DIFF_PAIRS} pairs; churn delta mean {mean:.0} vs {churn_delta:.0} \
         ({:+.2} SE), covered in {churn_covered} of {DIFF_PAIRS}",
        (mean - churn_delta) / standard_error
    );
    assert!(
        flagged * 10 <= DIFF_PAIRS,
        "site_steady flagged in {flagged} of {DIFF_PAIRS} pairs"
    );
    assert!(
        (mean - churn_delta).abs() <= 5.0 * standard_error,
        "churn delta mean {mean:.0}, truth {churn_delta:.0}, SE {standard_error:.0}"
    );
    assert!(
        churn_covered * 10 >= DIFF_PAIRS * 8,
        "churn delta covered in {churn_covered} of {DIFF_PAIRS}"
    );
}

/// 20,000 new live objects of 512 B (10 MB) between the dumps: flagged at
/// the growing site, and the gate fails or passes by its threshold.
#[test]
fn known_growth_is_flagged_and_gates_ci() {
    let program = program();
    for _ in 0..3 {
        let (outcome, a, b) = diff_run(&program, 20_000);
        let report = json_report(&b, Some(&a));
        let (estimate, low, _, significant) = change_or_zero(&report, "inuse-space", "site_grow");
        assert!(
            significant && low > 0.0,
            "growth {estimate:.0} (low {low:.0}) not flagged\n{}",
            outcome.context()
        );
        assert!(report["metrics"]["inuse-space"]["delta"]["significant"] == true);
        let (status, stderr) = gate(&a, &b, "1MB");
        assert_eq!(status, 1, "{stderr}");
        assert!(
            stderr.contains("FAIL") && stderr.contains("site_grow"),
            "{stderr}"
        );
        assert_eq!(gate(&a, &b, "50MB").0, 0);
        assert_eq!(gate(&a, &b, "50%").0, 1);
        assert_eq!(gate(&a, &b, "500%").0, 0);
        // Bad input stays exit status 2.
        assert_eq!(gate(&a, &b, "lots").0, 2);
        let without_base = Command::new(heapdiff_path())
            .args(["-f", "text", "--fail-if-grows", "1MB"])
            .arg(&b)
            .output()
            .unwrap();
        assert_eq!(without_base.status.code(), Some(2));
    }
}

/// Two runs of the program, each pid 1 of its own PID namespace (as two
/// containers' first processes are): the same pid, executable and period,
/// and the earlier dump of one run is, by its sequence number, time and
/// every counter, a plausible base for the later dump of the other. Only
/// the process id tells them apart: across runs every pair is independent,
/// within a run its two dumps are one process.
#[test]
fn two_pid_namespaces_are_never_one_process() {
    if !prerequisite::command_succeeds("unshare", &["--pid", "--fork", "true"]) {
        return skip(Missing::Privilege("unshare --pid is not permitted here"));
    }
    let program = program();
    let runs: Vec<(Outcome, std::path::PathBuf, std::path::PathBuf)> = (0..3)
        .map(|_| {
            let outcome = Run::new("unshare")
                .args(["--pid", "--fork", "env"])
                .arg(format!("LD_PRELOAD={}", shim_path().display()))
                .arg(format!(
                    "PROF_CONF=lg_prof_sample:{DIFF_LG},prof_final:false"
                ))
                .arg(&program.path)
                .args(["diff", "0", "a.prof", "b.prof"])
                .run();
            outcome.assert_success();
            let a = outcome.dir.path().join("a.prof");
            let b = outcome.dir.path().join("b.prof");
            (outcome, a, b)
        })
        .collect();
    for (_, a, b) in &runs {
        for path in [a, b] {
            let dump = format::decode(&std::fs::read(path).unwrap()).expect("a dump");
            assert_eq!(
                dump.pid,
                1,
                "{}: not pid 1 of its namespace",
                path.display()
            );
        }
    }
    for (i, (_, a, _)) in runs.iter().enumerate() {
        for (j, (_, _, b)) in runs.iter().enumerate() {
            let report = json_report(b, Some(a));
            let expected = if i == j {
                "same-process"
            } else {
                "independent"
            };
            assert_eq!(
                report["pairing"], expected,
                "the base dump of run {i} and the new one of run {j}"
            );
        }
    }
}

const ZERO_REQUESTS: u64 = 50_000;
const ZERO_RUNS: usize = 200;

/// 50,000 `malloc(0)` kept live, a run of their own (mixed into the other
/// sites, they would be most of the whole profile's object count at lg 19
/// while sampled in one run of ten). Empty requests are sampled like the
/// smallest ones (p = 1/R, a call using up one unit of the countdown) and
/// weigh 0 bytes: at lg 0 the count is exact; at lg 14 (three samples
/// expected) and 19 (0.1), over 200 runs each, the object count is unbiased
/// where the runs hold enough samples for the normal law of the mean (lg 14:
/// 610 effective samples; mean within 5 standard errors, a false failure
/// 8·10⁻⁷ by the exact Poisson sum of the runs' samples), and its interval
/// covers 50,000 in at least `least_count(n, 0.95, 2·10⁻⁷)` of the n runs
/// that sampled any, or is marked where it misses. Exactly, from the
/// binomial law of the count (50,000 trials at p = 1/16,384), a run at
/// lg 14 samples some with probability 0.953 and then covers with
/// probability 0.9956, so a false failure is below 10⁻²⁰ (measured 98.7 %
/// and 99.7 % of the runs with samples in two rounds of 400); at lg 19 a
/// run misses only with five samples or more (6·10⁻⁸ per run). The bytes
/// are estimated at 0.
#[test]
fn empty_requests_are_counted() {
    let program = program();
    let exact = Run::program(&program)
        .args(["zero", &ZERO_REQUESTS.to_string()])
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    exact.assert_success();
    let report = json_report(&exact.final_dump().0.path, None);
    let bound = self_bound(&report, "inuse-objects", "site_zero_bytes");
    let expected = ZERO_REQUESTS as f64;
    assert!(
        bound.is_some_and(|b| (b.estimate, b.low, b.high) == (expected, expected, expected)),
        "lg 0: {bound:?}"
    );
    let mut failures = Vec::new();
    for lg in PERIODS {
        let period = (1u64 << lg) as f64;
        let reports = in_parallel(ZERO_RUNS, |_| {
            let outcome = Run::program(&program)
                .args(["zero", &ZERO_REQUESTS.to_string()])
                .with_shim()
                .prof_conf(format!("lg_prof_sample:{lg}"))
                .run();
            outcome.assert_success();
            json_report(&outcome.final_dump().0.path, None)
        });
        let mut cell = Cell::default();
        for report in &reports {
            let bytes = self_bound(report, "inuse-space", "site_zero_bytes");
            // 0 bytes; the high end leaves room for unseen small requests.
            if bytes.is_some_and(|b| (b.estimate, b.low) != (0.0, 0.0)) {
                failures.push(format!("lg {lg}: empty requests weigh {bytes:?} bytes"));
            }
            if let Some(bound) = self_bound(report, "inuse-objects", "site_zero_bytes") {
                cell.observe(bound, expected);
            }
        }
        let p = inclusion(0.0, period);
        let sigma = (expected * (1.0 - p) / p).sqrt();
        let mean = cell.sum / ZERO_RUNS as f64;
        let standard_error = sigma / (ZERO_RUNS as f64).sqrt();
        let effective_samples = ZERO_RUNS as f64 * expected * expected / (sigma * sigma);
        eprintln!(
            "lg {lg}: sampled in {} of {ZERO_RUNS} runs, covered {}, misses {} (marked {}), mean {mean:.0} ({:+.2} SE)",
            cell.present,
            cell.covered,
            cell.misses,
            cell.marked_misses,
            (mean - expected) / standard_error
        );
        if effective_samples >= 100.0 && (mean - expected).abs() > 5.0 * standard_error {
            failures.push(format!(
                "lg {lg}: mean {mean:.0} more than 5 standard errors ({standard_error:.0}) from {expected}"
            ));
        }
        if !cell.holds() {
            failures.push(format!("lg {lg}: {cell:?}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
