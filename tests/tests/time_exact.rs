//! Births, lifetimes and the peak, exact at `lg_prof_sample:0` against the
//! programs' own truth: `time_sites.c` (a start-up table, temporaries, a
//! cache that evicts, a leak; it prints each freed object's lifetime bucket
//! and each live object's birth on the profiler's clock) and `peak.c` (it
//! keeps its live heap in usable bytes and prints its highest, when it was
//! reached, and its calls).
//!
//! The profiler reads the clock inside malloc and free, the programs just
//! before malloc and just after free: a lifetime the profiler measures is
//! never longer than the program's, and a birth never earlier.

use heapsample_format::{Dump, LIFETIME_BUCKETS, Stack, Weights};
use heapsample_tests::*;
use std::collections::BTreeMap;

const SITES: [&str; 4] = ["site_startup", "site_temporary", "site_cache", "site_leak"];

/// The program's truth: per site, freed objects and bytes per bucket (and
/// how many lay near a bucket edge), and the births and sizes of the live
/// objects.
#[derive(Default, Debug)]
struct Truth {
    freed: BTreeMap<String, [(u64, u64, u64); LIFETIME_BUCKETS]>,
    live: BTreeMap<String, Vec<(u64, u64)>>,
}

fn parse_truth(stdout: &str) -> Truth {
    let mut truth = Truth::default();
    for line in stdout.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let number = |i: usize| -> u64 { words[i].parse().expect(line) };
        match words.first() {
            Some(&"freed") => {
                let cells = truth
                    .freed
                    .entry(words[1].to_string())
                    .or_insert([(0, 0, 0); LIFETIME_BUCKETS]);
                cells[number(2) as usize] = (number(3), number(4), number(5));
            }
            Some(&"live") => truth
                .live
                .entry(words[1].to_string())
                .or_default()
                .push((number(2), number(3))),
            _ => {}
        }
    }
    truth
}

/// The site a stack was allocated in: the first of its frames that is one.
fn site_of(dump: &Dump, symbols: &Symbols, stack: &Stack) -> Option<&'static str> {
    symbols
        .frame_functions(dump, stack)
        .into_iter()
        .flatten()
        .find_map(|name| SITES.iter().copied().find(|site| *site == name))
}

#[test]
fn births_and_lifetimes_are_exact_at_lg_0() {
    let program = compile_c("time_sites.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    outcome.assert_success();
    let truth = parse_truth(&outcome.stdout);
    let (file, dump) = outcome.final_dump();
    let symbols = Symbols::of(&program);
    let start = dump.process.start_monotonic_ns;

    // Lifetimes: per site, the profiler's buckets against the program's.
    let mut seen = BTreeMap::<&str, [(u64, u64); LIFETIME_BUCKETS]>::new();
    for stack in &dump.stacks {
        let Some(site) = site_of(&dump, &symbols, stack) else {
            continue;
        };
        let cells = seen.entry(site).or_insert([(0, 0); LIFETIME_BUCKETS]);
        for bucket in &stack.lifetimes {
            // Every allocation sampled: the estimates are the counts.
            assert_eq!(
                (bucket.weights.objects, bucket.weights.bytes),
                (bucket.samples as f64, bucket.sampled_bytes as f64),
                "{}: {site} bucket {}",
                file.name,
                bucket.bucket
            );
            assert_eq!(bucket.weights.objects_variance, 0.0);
            let cell = &mut cells[usize::from(bucket.bucket)];
            cell.0 += bucket.samples;
            cell.1 += bucket.sampled_bytes;
        }
    }
    for site in SITES {
        let expected = truth
            .freed
            .get(site)
            .copied()
            .unwrap_or([(0, 0, 0); LIFETIME_BUCKETS]);
        let got = seen
            .get(site)
            .copied()
            .unwrap_or([(0, 0); LIFETIME_BUCKETS]);
        let context = || {
            format!(
                "{}: {site}\n program (objects, bytes, near an edge) per bucket: {:?}\n \
                 profiler (objects, bytes) per bucket: {:?}",
                file.name,
                expected
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.0 > 0)
                    .collect::<Vec<_>>(),
                got.iter()
                    .enumerate()
                    .filter(|(_, c)| c.0 > 0)
                    .collect::<Vec<_>>()
            )
        };
        let total = |cells: &mut dyn Iterator<Item = (u64, u64)>| {
            cells.fold((0, 0), |sum, c| (sum.0 + c.0, sum.1 + c.1))
        };
        assert_eq!(
            total(&mut got.iter().copied()),
            total(&mut expected.iter().map(|c| (c.0, c.1))),
            "every freed object counted once, with its bytes\n{}",
            context()
        );
        // The profiler's lifetimes are the program's, less the time between
        // the program's clock reads and the profiler's: its count at or
        // below each bucket is at least the program's, and exceeds it only
        // by objects near that bucket's upper edge (the temporaries, which
        // live about a microsecond, by any the program saw longer: a
        // preemption between its clock read and malloc moves them up).
        let (mut profiler_below, mut program_below) = (0, 0);
        for bucket in 0..LIFETIME_BUCKETS {
            profiler_below += got[bucket].0;
            program_below += expected[bucket].0;
            let above: u64 = expected[bucket + 1..].iter().map(|c| c.0).sum();
            let slack = match bucket + 1 {
                _ if site == "site_temporary" => above,
                next if next < LIFETIME_BUCKETS => expected[next].2 + expected[bucket].2,
                _ => 0,
            };
            assert!(
                profiler_below >= program_below && profiler_below <= program_below + slack,
                "bucket {bucket}: {profiler_below} objects at or below, the program's {program_below} \
                 (+{slack} near the edge)\n{}",
                context()
            );
        }
    }

    // Births: every live object of a site is a live sample of it, born
    // after the program read its clock and before it read it again.
    let mut births = BTreeMap::<&str, Vec<(u64, u64)>>::new();
    for sample in &dump.live_samples {
        let stack = &dump.stacks[sample.stack as usize];
        if let Some(site) = site_of(&dump, &symbols, stack) {
            births
                .entry(site)
                .or_default()
                .push((start + sample.birth_ns, sample.size));
        }
    }
    for site in SITES {
        let mut expected = truth.live.get(site).cloned().unwrap_or_default();
        expected.sort();
        let got = births.remove(site).unwrap_or_default();
        assert_eq!(
            got.len(),
            expected.len(),
            "{}: {site}: live samples against live objects",
            file.name
        );
        for (index, (&(born, size), &(program_born, program_size))) in
            got.iter().zip(&expected).enumerate()
        {
            let next = expected.get(index + 1).map_or(u64::MAX, |e| e.0);
            assert!(
                size == program_size && born >= program_born && born <= next.max(program_born),
                "{}: {site}: live sample {index} born at {born} ({size} B); the program's \
                 object born at {program_born} ({program_size} B), the next at {next}",
                file.name
            );
        }
    }
    // Live samples in birth order, each thread's births strictly increasing
    // (their identity), and as many as the dump counts.
    assert!(
        dump.live_samples
            .windows(2)
            .all(|w| w[0].birth_ns <= w[1].birth_ns)
    );
    let mut identities: Vec<(u32, u64)> = dump.live_samples.iter().map(|s| s.identity()).collect();
    identities.sort();
    identities.dedup();
    assert_eq!(
        identities.len(),
        dump.live_samples.len(),
        "identities unique"
    );
    assert_eq!(dump.live_samples.len() as u64, dump.totals.samples_live);
}

/// The number after `key=` in `line`.
fn value_in(line: &str, key: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|word| word.strip_prefix(key)?.strip_prefix('='))
        .and_then(|value| value.parse().ok())
}

/// `key=value` of the line starting with `tag`.
fn tagged(stdout: &str, tag: &str, key: &str) -> u64 {
    stdout
        .lines()
        .find(|line| line.starts_with(tag))
        .and_then(|line| value_in(line, key))
        .unwrap_or_else(|| panic!("no {tag} {key}= in:\n{stdout}"))
}

#[test]
fn the_exact_peak_and_counters_are_the_programs() {
    let program = compile_c("peak.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .with_shim()
        .prof_conf("prof_exact:true")
        .run();
    outcome.assert_success();
    let out = &outcome.stdout;
    let (file, dump) = outcome.final_dump();
    let totals = &dump.totals;
    // The program allocates nothing but its own blocks (stdout has a static
    // buffer): the exact counters are its calls, with nothing of the
    // profiler's own (its dump, its files, its directory scans).
    assert_eq!(
        (
            totals.allocations,
            totals.frees,
            totals.bytes_allocated,
            totals.live_usable_bytes
        ),
        (
            tagged(out, "calls", "allocations"),
            Some(tagged(out, "calls", "frees")),
            tagged(out, "calls", "bytes"),
            Some(tagged(out, "live", "usable"))
        ),
        "{}: exact counters against the program's",
        file.name
    );
    let peak = dump.peak.expect("prof_exact: the dump has the peak");
    assert_eq!(
        peak.live_usable_bytes,
        tagged(out, "peak", "usable"),
        "{}: the peak",
        file.name
    );
    // When: the profiler reads the clock when the heap first comes within
    // the margin of the peak, inside the allocation that brings it there;
    // the program reads it right after each allocation that rises.
    let at = dump.process.start_monotonic_ns + peak.at_ns;
    let rises: Vec<(u64, u64)> = out
        .lines()
        .filter(|line| line.starts_with("rise "))
        .map(|line| {
            (
                value_in(line, "usable").expect(line),
                value_in(line, "at").expect(line),
            )
        })
        .collect();
    let within = rises
        .iter()
        .position(|&(live, _)| live + peak.time_margin_bytes >= peak.live_usable_bytes)
        .expect("the program rose to its peak");
    let earliest = if within == 0 { 0 } else { rises[within - 1].1 };
    let latest = tagged(out, "peak", "at");
    assert!(
        (earliest..=latest).contains(&at),
        "{}: the peak's time {at} outside [{earliest}, {latest}] (margin {} B)",
        file.name,
        peak.time_margin_bytes
    );
    assert!(peak.time_margin_bytes <= (peak.live_usable_bytes / 256).max(4096));
}

/// Without `prof_exact` there is no exact live heap, so no peak.
#[test]
fn no_peak_without_prof_exact() {
    let program = compile_c("peak.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program).with_shim().run();
    outcome.assert_success();
    let (file, dump) = outcome.final_dump();
    assert_eq!(dump.peak, None, "{}", file.name);
    assert_eq!(dump.totals.live_usable_bytes, None);
}

/// What one run at a sparse period estimates, beside the program's truth:
/// per cell (estimate, its variance, truth).
fn sparse_run(program: &Program, lg: u32) -> Vec<(&'static str, f64, f64, f64)> {
    let outcome = Run::program(program)
        .with_shim()
        .prof_conf(format!("lg_prof_sample:{lg}"))
        .run();
    outcome.assert_success();
    let out = &outcome.stdout;
    let truth = parse_truth(out);
    let (_, dump) = outcome.final_dump();
    let symbols = Symbols::of(program);
    let law = dump.sampling_law();
    let start = dump.process.start_monotonic_ns;
    let phase = |name: &str| {
        (
            tagged(out, &format!("phase {name}"), "begin"),
            tagged(out, &format!("phase {name}"), "end"),
        )
    };
    let freed_truth = |site: &str| {
        truth.freed.get(site).map_or((0.0, 0.0), |cells| {
            cells.iter().fold((0.0, 0.0), |sum, c| {
                (sum.0 + c.0 as f64, sum.1 + c.1 as f64)
            })
        })
    };
    let mut freed = BTreeMap::<&str, [f64; 4]>::new();
    for stack in &dump.stacks {
        let Some(site) = site_of(&dump, &symbols, stack) else {
            continue;
        };
        let sums = freed.entry(site).or_default();
        for bucket in &stack.lifetimes {
            let w = bucket.weights;
            sums[0] += w.objects;
            sums[1] += w.bytes;
            sums[2] += w.objects_variance;
            sums[3] += w.bytes_variance;
        }
    }
    // Live bytes of a site born in a phase, estimated from the live samples.
    let born_in = |site: &str, (low, high): (u64, u64)| {
        let (mut bytes, mut variance) = (0.0, 0.0);
        for sample in &dump.live_samples {
            let born = start + sample.birth_ns;
            let stack = &dump.stacks[sample.stack as usize];
            if born >= low && born <= high && site_of(&dump, &symbols, stack) == Some(site) {
                let w = law.weights(sample.size);
                bytes += w.bytes;
                variance += w.bytes_variance;
            }
        }
        let truth: u64 = truth.live.get(site).map_or(0, |objects| {
            objects
                .iter()
                .filter(|(born, _)| *born >= low && *born <= high)
                .map(|(_, size)| size)
                .sum()
        });
        (bytes, variance, truth as f64)
    };
    let mut cells = Vec::new();
    for site in ["site_temporary", "site_cache"] {
        let s = freed.get(site).copied().unwrap_or_default();
        let (objects, bytes) = freed_truth(site);
        let names: [&'static str; 2] = if site == "site_temporary" {
            ["temporaries freed (objects)", "temporaries freed (bytes)"]
        } else {
            [
                "cache entries freed (objects)",
                "cache entries freed (bytes)",
            ]
        };
        cells.push((names[0], s[0], s[2], objects));
        cells.push((names[1], s[1], s[3], bytes));
    }
    let (b, v, t) = born_in("site_startup", phase("startup"));
    cells.push((
        "start-up table live, born in the start-up phase (bytes)",
        b,
        v,
        t,
    ));
    let (b, v, t) = born_in("site_leak", phase("ticks"));
    cells.push(("leak live, born during the ticks (bytes)", b, v, t));
    // From the pause between ticks 19 and 20 (of 40) to the end: no
    // allocation near the edge.
    let pause = (tagged(out, "tick 19 ", "end") + tagged(out, "tick 20 ", "begin")) / 2;
    let second_half = (pause, phase("ticks").1);
    let (b, v, t) = born_in("site_leak", second_half);
    cells.push((
        "leak live, born in the second half of the ticks (bytes)",
        b,
        v,
        t,
    ));
    cells
}

/// At a sparse period (2^12 bytes) the lifetimes of freed samples and the
/// births of live ones are unbiased estimates of the program's truth, with
/// intervals that cover it. Seven cells over N = 200 runs (the cache's
/// objects and bytes are one event: one size), each checked twice:
/// - **Unbiased**: the mean error lies within 5 standard errors of 0, its
///   standard error the spread of the errors over √N, so the statistic is
///   Student's t with 199 degrees of freedom (every cell rests on 47–560
///   samples a run, 9,400–112,000 over the runs: the mean's law is normal
///   well into its tails): a false failure per cell P(|t₁₉₉| > 5) =
///   1.3·10⁻⁶. The standard errors are 0.29–0.8 % of the truths, so a bias
///   of 5 % of the truth fails the temporaries', the cache's, the start-up
///   table's and the ticks' leak cells with probability > 0.999 and the
///   second half's leak with 0.89.
/// - **Covers**: the 95 % interval (estimate ± 1.96 √variance, the variance
///   estimated from the samples drawn) covers the truth in at least 174 of
///   the 200 runs. The interval's own coverage, summed exactly over the
///   binomial for the one-size cells (and from 2·10⁶ simulated runs for the
///   temporaries' eight sizes), is 94.75 % (start-up table: 256 objects of
///   4,096 bytes, p = 0.632), 94.86 % (the leak's second half, 120 of 2,048
///   bytes), 94.81 % / 94.93 % (temporaries' objects / bytes), 94.99 %
///   (cache, 864 of 1,024) and 95.08 % (the leak during the ticks): a false
///   failure per cell P(Bin(200, c) < 174) = 0.2–0.7·10⁻⁵. A variance half
///   the true one (coverage 82–84 %) fails each cell with probability ≥ 0.90
///   (all six together: > 0.999 999).
///
/// So a false failure per CI run is at most 2.7·10⁻⁵ + 6 × 1.3·10⁻⁶ =
/// 3.5·10⁻⁵ (it was 7.6·10⁻⁴ with 4 standard errors and 176 runs, and
/// 9.6·10⁻³ with 180). About 60–90 s on 2 busy cores.
#[test]
fn sparse_period_lifetimes_and_births_are_unbiased() {
    const RUNS: usize = 200;
    const MIN_COVERED: usize = 174;
    let program = compile_c("time_sites.c", &BuildOptions::no_pie());
    let mut per_cell = BTreeMap::<&str, Vec<(f64, f64, f64)>>::new();
    for _ in 0..RUNS {
        for (name, estimate, variance, truth) in sparse_run(&program, 12) {
            per_cell
                .entry(name)
                .or_default()
                .push((estimate, variance, truth));
        }
    }
    let mut problems = Vec::new();
    for (name, runs) in &per_cell {
        let n = runs.len() as f64;
        let errors: Vec<f64> = runs.iter().map(|(e, _, t)| e - t).collect();
        let mean = errors.iter().sum::<f64>() / n;
        let spread = (errors.iter().map(|e| (e - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let standard_error = spread / n.sqrt();
        let covered = runs
            .iter()
            .filter(|(e, v, t)| (e - t).abs() <= 1.96 * v.sqrt())
            .count();
        let truth = runs.iter().map(|r| r.2).sum::<f64>() / n;
        let line = format!(
            "{name}: truth {truth:.0}, mean error {mean:.1} (standard error {standard_error:.1}), \
             covered in {covered} of {RUNS} runs (at least {MIN_COVERED})"
        );
        if mean.abs() > 5.0 * standard_error || covered < MIN_COVERED || truth <= 0.0 {
            problems.push(line);
        } else {
            eprintln!("{line}");
        }
    }
    assert_eq!(per_cell.len(), 7, "{per_cell:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A forked child's peak is its own: it starts from the heap the child
/// inherited, at the fork, so the parent's 8 MiB freed before the fork is
/// not the child's peak; the parent's is.
#[test]
fn a_forked_child_has_its_own_peak() {
    let program = compile_c("peak_fork.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .with_shim()
        .prof_conf("prof_exact:true,prof_fork_final:all")
        .run();
    outcome.assert_success();
    let out = &outcome.stdout;
    let (parent_pid, child_pid) = (tagged(out, "parent", "pid"), tagged(out, "child", "pid"));
    let dumps = outcome.dumps();
    let peak_of = |pid: u64| {
        let (file, dump) = dumps
            .iter()
            .find(|(f, _)| u64::from(f.pid) == pid)
            .unwrap_or_else(|| panic!("no dump of {pid}\n{}", outcome.context()));
        (
            file.name.clone(),
            dump.peak.expect("prof_exact: a peak"),
            dump.totals.live_usable_bytes,
        )
    };
    let (name, parent, _) = peak_of(parent_pid);
    let parent_own = tagged(out, "parent", "peak");
    assert!(
        parent.live_usable_bytes >= parent_own,
        "{name}: the parent's peak {} below its 8 MiB block ({parent_own})",
        parent.live_usable_bytes
    );
    let (name, child, _) = peak_of(child_pid);
    let child_own = tagged(out, "child", "peak");
    assert!(
        child.live_usable_bytes >= child_own && child.live_usable_bytes < parent_own,
        "{name}: the child's peak {} is not its own ({child_own} of its blocks; the parent's \
         block before the fork {parent_own})",
        child.live_usable_bytes
    );
}

/// Every dump of `outcome` lists, per stack, exactly the live samples the
/// stack counts: their number, requested bytes, usable bytes (where each
/// kept its usable size) and Horvitz–Thompson sums, and the totals count the
/// list. A dump taken while the program allocates and frees, on the thread
/// that allocates or beside other threads, is one moment. Returns how many
/// interval dumps there were.
fn assert_dumps_list_what_their_stacks_count(outcome: &Outcome) -> usize {
    let dumps = outcome.dumps();
    for (file, dump) in &dumps {
        let law = heapsample_format::SamplingLaw::with_bytes_per_call(
            1 << dump.lg_sample_period,
            u64::from(dump.bytes_per_call),
        );
        // Per stack: samples, bytes, usable bytes (None once one is not
        // kept), and the sums of their weights.
        let mut listed = vec![(0u64, 0u64, Some(0u64), Weights::default()); dump.stacks.len()];
        for sample in &dump.live_samples {
            let cell = listed
                .get_mut(sample.stack as usize)
                .unwrap_or_else(|| panic!("{}: a sample of no stack: {sample:?}", file.name));
            cell.0 += 1;
            cell.1 += sample.size;
            cell.2 = cell
                .2
                .filter(|_| sample.usable != 0)
                .map(|u| u + sample.usable);
            cell.3 = cell.3.plus(&law.weights(sample.size));
        }
        for (at, (stack, cell)) in dump.stacks.iter().zip(&listed).enumerate() {
            assert_eq!(
                (stack.live_objects, stack.live_bytes),
                (cell.0, cell.1),
                "{}: stack {at} counts (live objects, bytes) but lists other live samples",
                file.name
            );
            if let Some(usable) = cell.2 {
                assert_eq!(stack.live_usable_bytes, usable, "{}: stack {at}", file.name);
            }
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
            let (sums, weights) = (stack.live.as_array(), cell.3.as_array());
            assert!(
                sums.iter().zip(&weights).all(|(&a, &b)| close(a, b)),
                "{}: stack {at}: live sums {sums:?}, its samples' weights {weights:?}",
                file.name
            );
        }
        assert_eq!(
            dump.totals.samples_live,
            dump.live_samples.len() as u64,
            "{}",
            file.name
        );
    }
    dumps.iter().filter(|(file, _)| file.trigger == "i").count()
}

/// Interval dumps are written by the dumper thread while the program goes
/// on allocating and freeing (and from the sample event that crosses the
/// interval): every one lists exactly what its stacks count, at `lg 0` and
/// at a sparse period, for `time_sites.c` and for four threads that pass
/// blocks to each other (`threads.c`).
#[test]
fn interval_dumps_list_the_live_samples_their_stacks_count() {
    let time_sites = compile_c("time_sites.c", &BuildOptions::no_pie());
    let threads = compile_c("threads.c", &BuildOptions::no_pie());
    for (program, args, conf) in [
        (&time_sites, &[][..], "lg_prof_sample:0,lg_prof_interval:19"),
        (
            &time_sites,
            &[][..],
            "lg_prof_sample:10,lg_prof_interval:18",
        ),
        (
            &threads,
            &["4", "20000"][..],
            "lg_prof_sample:0,lg_prof_interval:20",
        ),
        (
            &threads,
            &["4", "20000"][..],
            "lg_prof_sample:8,lg_prof_interval:19",
        ),
    ] {
        let outcome = Run::program(program)
            .args(args)
            .with_shim()
            .prof_conf(format!("prof:true,{conf}"))
            .run();
        outcome.assert_success();
        let intervals = assert_dumps_list_what_their_stacks_count(&outcome);
        assert!(
            intervals >= 5,
            "{conf}: {intervals} interval dumps, too few to show anything\n{}",
            outcome.context()
        );
    }
}
