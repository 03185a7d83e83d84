//! Sampling accuracy at a sparse period.
//!
//! The shim's countdown is exponential with mean R = 2^lg_prof_sample bytes,
//! and a call uses up its request plus one byte of it, so (the countdown
//! being memoryless) each allocation of s bytes is sampled independently
//! with probability p = 1 - (1 - 1/R)^(s+1). A site that made n
//! objects of s bytes therefore has a sampled count k ~ Binomial(n, p), and
//! the unbiased estimate of its bytes is k·s/p, with standard deviation
//!
//!   sigma = s · sqrt(n (1 - p) / p).
//!
//! The test accepts an estimate within 5 sigma of the program's exact number,
//! and sizes the run so that 5 sigma is a few percent to ~20 % of the value:
//! a biased sampler (e.g. one that samples by count, uses the wrong period,
//! or loses frees) fails it. A false failure is the binomial's own tail
//! beyond 5 sigma, summed exactly: 6·10⁻⁷ (the normal's) for the sites of
//! many samples, up to 3.4·10⁻⁶ and 4.9·10⁻⁶ for the 5,000 strdup'd 32-byte
//! and 2,500 48-byte objects (about 40 and 30 samples, whose upper tail is
//! the longer), 3.3·10⁻⁵ per run for the 22 comparisons together.

use heapsample_tests::*;

const LG: u32 = 12;
const MULTIPLIER: u32 = 50;
const SIGMAS: f64 = 5.0;

struct Estimate {
    expected: f64,
    estimate: f64,
    sigma: f64,
    sampled: u64,
}

fn estimate(n: u64, size: u64, sampled_objects: u64) -> Estimate {
    let r = (1u64 << LG) as f64;
    let s = size as f64;
    let p = 1.0 - (1.0 - 1.0 / r).powf(s + 1.0);
    Estimate {
        expected: n as f64 * s,
        estimate: sampled_objects as f64 * s / p,
        sigma: s * (n as f64 * (1.0 - p) / p).sqrt(),
        sampled: sampled_objects,
    }
}

fn within(e: &Estimate) -> bool {
    // 1e-9 relative for floating error when p == 1 (sigma 0).
    (e.estimate - e.expected).abs() <= SIGMAS * e.sigma + 1e-9 * e.expected.max(1.0)
}

#[test]
fn sparse_period_estimates_are_within_the_sampling_bound() {
    let program = compile_c("alloc_sites.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .arg(MULTIPLIER.to_string())
        .with_shim()
        .prof_conf(format!("lg_prof_sample:{LG}"))
        .run();
    outcome.assert_success();
    let sites = parse_sites(&outcome.stdout);
    let (_, dump) = outcome.final_dump();
    assert_eq!(dump.lg_sample_period, LG);
    let symbols = Symbols::of(&program);
    let table = per_function(&dump, &symbols);
    let mut failures = Vec::new();
    let mut report = String::new();
    let mut checked = 0;
    for site in &sites {
        let size = site.get("size");
        if size == 0 || site.opt("exact_alloc") != Some(1) {
            continue;
        }
        let got = table.get(&site.name).copied().unwrap_or_default();
        // Sampled records carry the requested size.
        if got.live_bytes != got.live_objects * size || got.alloc_bytes != got.alloc_objects * size
        {
            failures.push(format!(
                "{}: sampled bytes are not objects x {size}: {got:?}",
                site.name
            ));
        }
        let live = estimate(site.get("live_objects"), size, got.live_objects);
        let alloc = estimate(site.get("alloc_objects"), size, got.alloc_objects);
        for (what, e) in [("live bytes", &live), ("alloc bytes", &alloc)] {
            report.push_str(&format!(
                "  {}: {what}: exact {:.0}, estimate {:.0} from {} samples, sigma {:.0}\n",
                site.name, e.expected, e.estimate, e.sampled, e.sigma
            ));
            if !within(e) {
                failures.push(format!(
                    "{}: estimated {what} {:.0} is {:.1} sigma from the exact {:.0} (sigma {:.0}, {} samples)",
                    site.name,
                    e.estimate,
                    (e.estimate - e.expected) / e.sigma.max(1e-9),
                    e.expected,
                    e.sigma,
                    e.sampled
                ));
            }
            checked += 1;
        }
        // The format crate's weights (what the dump carries and heapdiff
        // shows) agree with the estimator above for constant-size sites.
        let crate_bytes =
            got.live_objects as f64 * format::sample_weights(size, dump.sample_period()).bytes;
        if (crate_bytes - live.estimate).abs() > 1e-6 * live.estimate.max(1.0) {
            failures.push(format!(
                "{}: the format's weights give {crate_bytes}, expected {}",
                site.name, live.estimate
            ));
        }
    }
    assert!(
        checked >= 16,
        "too few sites checked\n{}",
        outcome.context()
    );
    assert!(
        failures.is_empty(),
        "sampling estimates out of bounds:\n{}\nall estimates:\n{report}{}",
        failures.join("\n"),
        render_per_function(&table)
    );
}

/// With no PROF_CONF the period is 2^19 (jemalloc's default), and a program
/// with a few MiB of allocations takes some samples but not all.
#[test]
fn default_period_is_2_pow_19() {
    let program = compile_c("alloc_sites.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program).arg("20").with_shim().run();
    outcome.assert_success();
    assert!(
        outcome.heapsample_lines().is_empty(),
        "the shim printed something without being asked: {:?}",
        outcome.heapsample_lines()
    );
    let (_, dump) = outcome.final_dump();
    assert_eq!(dump.lg_sample_period, 19);
    let t = &dump.totals;
    assert!(
        t.samples_taken > 0 && t.samples_taken < t.allocations / 10,
        "at a 512 KiB period, {} samples of {} allocations is implausible",
        t.samples_taken,
        t.allocations
    );
    // The three 1 MiB objects are sampled with probability 1 - e^-2 each;
    // alloc_site_malloc_half_freed alone allocates 10 MB (p ~ 1 for ~19 samples).
    let symbols = Symbols::of(&program);
    let table = per_function(&dump, &symbols);
    let half = table
        .get("alloc_site_malloc_half_freed")
        .copied()
        .unwrap_or_default();
    assert!(
        half.alloc_objects > 0,
        "no sample in a site that allocated 10 MB\n{}",
        render_per_function(&table)
    );
}
