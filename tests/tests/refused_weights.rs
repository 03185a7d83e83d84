//! A dump whose checksum is valid but whose weights are below what their
//! samples count (the `fuzz/seeds/dump-refused/` corpus: a subnormal
//! 5e-324 per-stack weight; no shim writes one) is refused with one line
//! and exit status 2 by every output and time view of `heapdiff`, and
//! `heapdiff serve` answers 422 for its views and profiles.

mod serve_common;

use heapsample_tests::*;
use serve_common::*;
use std::path::PathBuf;

fn refused_seeds() -> Vec<PathBuf> {
    let dir = workspace_root().join("fuzz/seeds/dump-refused");
    let mut seeds: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the refused seeds")
        .map(|entry| entry.unwrap().path())
        .collect();
    seeds.sort();
    assert!(!seeds.is_empty(), "no seed in {}", dir.display());
    seeds
}

#[test]
fn every_command_refuses_a_weight_below_one_with_one_line() {
    let dir = TempDir::new("refused-weights");
    for seed in refused_seeds() {
        let copy = dir.path().join(seed.file_name().unwrap());
        std::fs::copy(&seed, &copy).unwrap();
        let out = dir.path().join("out");
        for args in [
            &["-f", "text"][..],
            &["-f", "json"],
            &["-f", "folded"],
            &["-f", "svg", "-o"],
            &["-f", "pprof", "-o"],
            &["-f", "html", "-o"],
            &["lifetimes"],
            &["ages"],
            &["leaks"],
            &["-m", "temp-space", "-f", "text"],
        ] {
            let mut run = Run::new(heapdiff_path()).args(args);
            if args.last() == Some(&"-o") {
                run = run.arg(&out);
            }
            let outcome = run.arg(&copy).run();
            let context = format!("{args:?} on {}\n{}", seed.display(), outcome.context());
            assert_eq!(outcome.status.code(), Some(2), "{context}");
            let lines: Vec<&str> = outcome.stderr.lines().collect();
            assert_eq!(lines.len(), 1, "{context}");
            assert!(
                lines[0].starts_with("heapdiff: ") && lines[0].contains("weight below 1"),
                "{context}"
            );
            assert!(!out.exists(), "{context}: wrote an output");
        }
    }
}

#[test]
fn serve_answers_422_for_a_weight_below_one() {
    let dir = TempDir::new("refused-weights-serve");
    let seeds = refused_seeds();
    for seed in &seeds {
        std::fs::copy(seed, dir.path().join(seed.file_name().unwrap())).unwrap();
    }
    let server = Server::start(&[dir.path()]);
    for seed in &seeds {
        let id = seed.file_name().unwrap().to_str().unwrap();
        for path in [
            format!("/view?dump={id}"),
            format!("/pprof/{id}"),
            format!("/api/lifetimes?dump={id}"),
        ] {
            let (status, body) = server.get(&path);
            assert_eq!(status, 422, "{path}: {body}");
            assert!(body.contains("weight below 1"), "{path}: {body}");
        }
    }
    let (status, listing) = server.get("/api/dumps");
    assert_eq!(status, 200);
    assert!(listing.contains("weight below 1"), "{listing}");
}
