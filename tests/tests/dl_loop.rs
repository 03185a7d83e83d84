//! dlopen/dlclose loops (plugin hosts, PAM, NSS): the profiler's cost per
//! iteration does not grow with the number of loads before it, the module
//! map and the dump stay bounded, and every plugin's allocations are
//! attributed to it although the plugins take turns at the same addresses;
//! and a relative `dlopen` name is recorded as the absolute path it meant.

use std::path::{Path, PathBuf};

use heapsample_tests::*;

const PLUGINS: usize = 20;
const ITERATIONS: u64 = 20_000;
/// Side-by-side pairs (without, with the profiler) per loop.
const PAIRS: usize = 3;

fn build_plugins(dir: &Path) {
    for id in 0..PLUGINS {
        build_shared_library(
            "dl_plugin.c",
            &dir.join(format!("plugin_{id}.so")),
            &[
                "-g",
                "-O1",
                "-fno-omit-frame-pointer",
                &format!("-DPLUGIN_ID={id}"),
            ],
        );
    }
}

fn program() -> Program {
    compile_c(
        "dl_loop.c",
        &BuildOptions {
            extra_flags: vec!["-ldl".into()],
            ..BuildOptions::no_pie()
        },
    )
}

struct LoopResult {
    cpu_seconds: f64,
    rss_kib: f64,
    /// CPU seconds of each quarter of the iterations.
    quarters: Vec<f64>,
}

fn parse(outcome: &Outcome) -> LoopResult {
    let line = outcome
        .stdout
        .lines()
        .find(|l| l.starts_with("iterations="))
        .unwrap_or_else(|| panic!("no result line\n{}", outcome.context()));
    let get = |key: &str| -> &str {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in {line}"))
    };
    let number = |text: &str| -> f64 { text.parse().unwrap_or_else(|_| panic!("{line}")) };
    LoopResult {
        cpu_seconds: number(get("seconds=")),
        rss_kib: number(get("rss_kib=")),
        quarters: get("quarters=").split(',').map(number).collect(),
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// 20,000 plugin loads in each of three loops over 20 plugins, at
/// `lg_prof_sample:0` (every allocation in a plugin sampled: the worst
/// case): `rounds` (all 20 open at once, 1,000 rounds), `single` (one at a
/// time, each reloaded where the last one was) and `alternate` (the next
/// opened before the previous is closed, so each plugin reloads where a
/// sibling was in between: this was quadratic, 68 s where the loop takes
/// 0.7 s).
///
/// Claims, each measured side by side in this test on a shared machine:
/// - time: the median over 3 interleaved pairs of CPU(with) / CPU(without)
///   is at most 3: a guard against work per load that grows (the quadratic
///   loop was 95), not a cost claim (those are `bench/`'s). Measured 1.2–1.4
///   earlier, 1.25–1.79 per pair (medians 1.37, 1.69, 1.67) at a load
///   average of 8–10 on 2 cores on 2026-11-29: the profiled run's tables
///   suffer more from a busy machine's caches than the plain run, so 2
///   left a margin of 12 % on one pair;
/// - flat cost: the median over those runs of CPU(last quarter of the
///   iterations) / CPU(first quarter) is at most 1.5 (measured ≈ 1.0; the
///   quadratic loop 46);
/// - bounded memory and dump: RSS within 8 MiB of the run without the
///   profiler; the exit dump of 20,000 iterations at most 1.25× that of
///   2,000 (+4 KiB) and under 256 KiB, with at most four module entries per
///   plugin;
/// - attribution: at lg 0 each plugin's `plugin_work` has exactly its own
///   1/20 of the iterations' allocations.
#[test]
fn dlopen_dlclose_loops_cost_flat_and_stay_bounded() {
    let plugins = TempDir::new("plugins");
    build_plugins(plugins.path());
    let program = program();
    for (mode, n) in [
        ("rounds", ITERATIONS / PLUGINS as u64),
        ("single", ITERATIONS),
        ("alternate", ITERATIONS),
    ] {
        let run = |n: u64| {
            Run::program(&program)
                .arg(mode)
                .arg(n.to_string())
                .arg(plugins.path())
                .arg(PLUGINS.to_string())
                .prof_conf("lg_prof_sample:0")
                .timeout(std::time::Duration::from_secs(300))
        };
        let (mut ratios, mut flatness, mut last) = (Vec::new(), Vec::new(), None);
        for _ in 0..PAIRS {
            let plain = run(n).without_shim().run();
            plain.assert_success();
            let profiled = run(n).with_shim().run();
            profiled.assert_success();
            let (base, shim) = (parse(&plain), parse(&profiled));
            ratios.push(shim.cpu_seconds / base.cpu_seconds);
            flatness.push(shim.quarters[3] / shim.quarters[0]);
            assert!(
                shim.rss_kib <= base.rss_kib + 8192.0,
                "{mode}: RSS {} KiB with the profiler, {} KiB without",
                shim.rss_kib,
                base.rss_kib
            );
            last = Some(profiled);
        }
        let (ratio, flat) = (median(ratios.clone()), median(flatness.clone()));
        eprintln!(
            "{mode}: CPU with/without {ratios:.2?} (median {ratio:.2}), last/first quarter {flatness:.2?}"
        );
        assert!(
            ratio <= 3.0,
            "{mode}: {ratio:.2}x the CPU time without the profiler"
        );
        assert!(
            flat <= 1.5,
            "{mode}: the last quarter of the loop took {flat:.2}x the first"
        );

        let profiled = last.expect("ran");
        let (file, dump) = profiled.final_dump();
        let size = std::fs::metadata(&file.path).unwrap().len();
        let short = run(n / 10).with_shim().run();
        short.assert_success();
        let short_size = std::fs::metadata(&short.final_dump().0.path).unwrap().len();
        let plugin_modules = dump
            .modules
            .iter()
            .filter(|m| m.path.contains("plugin_"))
            .count();
        eprintln!(
            "{mode}: exit dump {size} bytes ({short_size} after a tenth of the loop), {} modules, {plugin_modules} of plugins",
            dump.modules.len()
        );
        assert!(
            size as f64 <= 1.25 * short_size as f64 + 4096.0 && size < 256 << 10,
            "{mode}: exit dump of {size} bytes, {short_size} after a tenth of the loop"
        );
        assert!(plugin_modules <= 4 * PLUGINS, "{mode}: {:#?}", dump.modules);
        assert_each_plugin_has_its_share(&file.path, ITERATIONS / PLUGINS as u64, mode);
    }
}

/// `heapdiff --format folded` attributes exactly `share` allocations to each
/// plugin's `plugin_work`.
fn assert_each_plugin_has_its_share(dump: &Path, share: u64, mode: &str) {
    let folded = heapdiff_ok(&[
        "--format",
        "folded",
        "--metric",
        "alloc-objects",
        path_str(dump),
    ]);
    for id in 0..PLUGINS {
        let function = format!("plugin_work [plugin_{id}.so]");
        let count: u64 = folded
            .lines()
            .filter(|line| line.contains(&function))
            .filter_map(|line| line.rsplit_once(' ')?.1.parse::<u64>().ok())
            .sum();
        assert_eq!(count, share, "{mode}: {function}\n{folded}");
    }
}

/// `dlopen("./plugin_0.so")` in one directory, then `chdir("/")`: the dump
/// names the library by its absolute path in the first directory. (At
/// `lg_prof_sample:0`, so that the plugin's allocation is sampled: a dump
/// lists the objects its stacks have frames in.)
#[test]
fn a_relative_dlopen_name_is_recorded_absolute() {
    let plugins = TempDir::new("relative");
    build_plugins(plugins.path());
    let out = TempDir::new("relative-out");
    let dump_path: PathBuf = out.path().join("rel.prof");
    let outcome = Run::program(&program())
        .arg("relative")
        .arg(plugins.path())
        .arg(&dump_path)
        .with_shim()
        .prof_conf("lg_prof_sample:0")
        .run();
    outcome.assert_success();
    assert!(
        outcome.stdout.contains("dump rc=0"),
        "{}",
        outcome.context()
    );
    let dump = format::decode(&std::fs::read(&dump_path).unwrap()).unwrap();
    let expected = plugins.path().join("plugin_0.so");
    assert!(
        dump.modules.iter().any(|m| Path::new(&m.path) == expected),
        "{expected:?} not among {:#?}",
        dump.modules.iter().map(|m| &m.path).collect::<Vec<_>>()
    );
    assert!(
        dump.modules
            .iter()
            .all(|m| !m.path.contains('/') || m.path.starts_with('/')),
        "a relative module path: {:#?}",
        dump.modules
    );
}
