//! What `go tool pprof` and continuous profilers read from `heapdiff
//! serve`, on dumps of real programs run under the shim:
//!
//! - the README's command, `go tool pprof -top http://…/pprof/<dump>`,
//!   works as written on a stripped program whose functions heapdiff cannot
//!   name (pprof asks the server's `/symbolz` for them and gets the names
//!   heapdiff shows, `serve_growth+0x…`), and on a comparison;
//! - each process's latest dump at `/debug/pprof/heap` and
//!   `/debug/pprof/allocs` (chosen by `?pid=` or `?exe=`, the pull
//!   protocol Parca and Grafana Alloy scrape): the newest dump, the right
//!   sample type first, the totals of `heapdiff --format text`; without a
//!   choice among several processes, a refusal naming them;
//! - a stripped binary's functions are named from its dynamic symbol table
//!   where that names them (`-rdynamic`), and only there.

mod serve_common;

use heapsample_tests::*;
use serve_common::*;

/// `serve_growth.c` built (linked with `extra` flags), then stripped of
/// every symbol table but the dynamic one, run at lg 0; the directory
/// holding the binary (kept while the dumps are read: they name it).
fn run_stripped(extra: &[&str]) -> (Outcome, TempDir) {
    let mut options = BuildOptions::no_pie();
    options.extra_flags = extra.iter().map(|s| s.to_string()).collect();
    let program = compile_c("serve_growth.c", &options);
    let work = TempDir::new("stripped");
    let stripped = work.path().join("serve_growth");
    std::fs::copy(&program.path, &stripped).unwrap();
    let status = std::process::Command::new("strip")
        .arg("--strip-all")
        .arg(&stripped)
        .status()
        .expect("run strip");
    assert!(status.success());
    let outcome = Run::new(&stripped)
        .with_shim()
        .prof_conf("lg_prof_sample:0,prof_exact:true,lg_prof_interval:20,prof_final:true")
        .run();
    outcome.assert_success();
    (outcome, work)
}

fn final_name(outcome: &Outcome) -> String {
    dump_names(outcome)
        .into_iter()
        .find(|n| n.contains(".f."))
        .expect("exit dump")
}

#[test]
fn go_tool_pprof_reads_every_served_profile_without_flags() {
    let (outcome, _binary) = run_stripped(&[]);
    let dir = outcome.dir.path();
    let exit = final_name(&outcome);
    let first = dump_names(&outcome).remove(0);
    let text = heapdiff_ok(&["--format", "text", dir.join(&exit).to_str().unwrap()]);
    assert!(text.contains("serve_growth+0x"), "stripped: {text}");
    let server = Server::start(&[dir]);
    let home = TempDir::new("pprof-home");
    // As the README writes it.
    let url = format!("{}/pprof/{exit}", server.url);
    let Some(top) = go_tool_pprof(&["-top"], &url, home.path()) else {
        return;
    };
    assert!(
        top.contains("serve_growth+0x"),
        "pprof names the frames as heapdiff does:\n{top}"
    );
    // The symbol service pprof asked, directly.
    let (status, body) = server.get("/symbolz");
    assert_eq!((status, body.as_str()), (200, "num_symbols: 1\n"));
    // A comparison, and the allocated space.
    let url = format!("{}/pprof/{exit}?base={first}", server.url);
    let Some(diff) = go_tool_pprof(&["-top", "-sample_index=alloc_space"], &url, home.path())
    else {
        return;
    };
    assert!(diff.contains("Type: alloc_space"), "{diff}");
}

/// The `Showing nodes accounting for X, P% of TOTAL total` of `pprof -top
/// -unit=B`, in bytes.
fn pprof_total(top: &str) -> f64 {
    let line = top
        .lines()
        .find(|l| l.contains(" total"))
        .unwrap_or_else(|| panic!("{top}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "total").unwrap();
    words[at - 1].trim_end_matches('B').parse().expect("bytes")
}

/// The sampled estimate of `metric` in `heapdiff --format text`'s totals.
fn text_total(text: &str, what: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.contains("totals: sampled estimate"))
        .unwrap_or_else(|| panic!("{text}"));
    let after = line.split(what).nth(1).unwrap_or_else(|| panic!("{line}"));
    after
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .expect("number")
}

#[test]
fn the_latest_dump_of_a_process_in_the_scrapers_shape() {
    let growth = run_growth();
    let (stripped, _binary) = run_stripped(&[]);
    let server = Server::start(&[growth.dir.path(), stripped.dir.path()]);
    let home = TempDir::new("pprof-home");
    // Dump names sort by their sequence numbers.
    let latest = |outcome: &Outcome| outcome.dir.path().join(dump_names(outcome).pop().unwrap());
    let text = heapdiff_ok(&["--format", "text", latest(&growth).to_str().unwrap()]);
    for (path, index, what) in [
        ("heap", "inuse_space", "in use "),
        ("allocs", "alloc_space", "allocated "),
    ] {
        let url = format!("{}/debug/pprof/{path}?pid={}", server.url, growth.pid);
        let Some(top) = go_tool_pprof(&["-top", "-unit=B"], &url, home.path()) else {
            return;
        };
        assert!(top.contains(&format!("Type: {index}")), "{top}");
        assert_eq!(pprof_total(&top), text_total(&text, what), "{top}\n{text}");
    }
    // By executable name (what scrapers add, such as `seconds`, ignored).
    let (status, _) = server.get("/debug/pprof/heap?exe=serve_growth&seconds=30");
    assert_eq!(status, 200);
    let (status, _) = server.get(&format!("/debug/pprof/allocs?pid={}", stripped.pid));
    assert_eq!(status, 200);
    // Several processes and no choice: refused, naming them.
    let (status, body) = server.get("/debug/pprof/heap");
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains(&format!("pid={}", growth.pid))
            && body.contains(&format!("pid={}", stripped.pid)),
        "{body}"
    );
    let (status, _) = server.get("/debug/pprof/heap?pid=1");
    assert_eq!(status, 404);
}

#[test]
fn a_stripped_binary_is_named_from_its_dynamic_symbols() {
    // -rdynamic puts the program's functions in .dynsym; strip keeps it.
    let (exported, _exported_binary) = run_stripped(&["-rdynamic"]);
    let (plain, _plain_binary) = run_stripped(&[]);
    let self_names = |outcome: &Outcome| {
        let dump = outcome.dir.path().join(final_name(outcome));
        heapdiff_ok(&["--format", "folded", dump.to_str().unwrap()])
    };
    let named = self_names(&exported);
    assert!(
        named.contains(";grow_cache ") && named.contains(";steady_table "),
        "dynamic symbols name them:\n{named}"
    );
    let unnamed = self_names(&plain);
    assert!(
        !unnamed.contains("grow_cache") && unnamed.contains("serve_growth+0x"),
        "no symbol at all: placeholders, never a wrong name:\n{unnamed}"
    );
}
