//! `heapdiff serve` over plain HTTP, on dumps of a real program run under
//! the shim (`serve_growth.c`, every allocation sampled):
//!
//! - the list groups the dumps by process, shows a corrupt file as one error
//!   row, ignores temporary files and picks up a dump added while serving;
//! - hostile requests (`..`, `%2e%2e`, absolute paths, a symbolic link out
//!   of the directory, a huge query, POST/PUT/DELETE) are refused and the
//!   server keeps serving;
//! - `go tool pprof -top` on a served URL agrees with the text report;
//! - a query over 2 KiB is refused as too long;
//! - `heapdiff merge` of two processes' dumps is the sum of their estimates,
//!   in the text report and in the pprof profile.

mod serve_common;

use heapsample_tests::*;
use serve_common::*;

/// Decode a gzipped pprof file written by heapdiff.
fn read_pprof(path: &std::path::Path) -> heapdiff::render::pprof::PbProfile {
    use prost::Message;
    use std::io::Read;
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(&std::fs::read(path).expect("read pprof")[..])
        .read_to_end(&mut bytes)
        .expect("gunzip");
    heapdiff::render::pprof::PbProfile::decode(&bytes[..]).expect("decode profile.proto")
}

fn listing(server: &Server) -> serde_json::Value {
    let (status, body) = server.get("/api/dumps");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).expect("JSON listing")
}

fn listed_ids(listing: &serde_json::Value) -> Vec<String> {
    listing["processes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["dumps"].as_array().unwrap().iter())
        .map(|d| d["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn list_refuses_hostile_requests_and_serves_pprof() {
    let run = run_growth();
    let dir = run.dir.path();
    let names = dump_names(&run);
    assert!(names.len() >= 5, "expected interval dumps: {names:?}");
    std::fs::write(
        dir.join("corrupt.prof"),
        [b"HEAPSMPL".as_slice(), &[0xff; 64]].concat(),
    )
    .unwrap();
    std::fs::write(dir.join("being-written.prof.tmp.4242"), b"partial").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.join("escape.prof")).unwrap();
    let outside = TempDir::new("serve-outside");
    std::fs::copy(dir.join(&names[0]), outside.path().join("outside.prof")).unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.join("linked-dir")).unwrap();
    let mut server = Server::start(&[dir]);

    // The list: one process, every dump, one error row, nothing else.
    let list = listing(&server);
    let processes = list["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 1, "{list}");
    assert_eq!(processes[0]["pid"].as_u64(), Some(u64::from(run.pid)));
    let mut ids = listed_ids(&list);
    ids.sort();
    assert_eq!(ids, names, "every dump and nothing else");
    let errors = list["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{list}");
    assert_eq!(errors[0]["id"], "corrupt.prof");
    assert!(!errors[0]["error"].as_str().unwrap().is_empty(), "{list}");
    // Exact mode: the live estimate is the exact sampled sum, no band.
    let last = processes[0]["dumps"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["live_low"], last["live_high"]);

    // A new dump appears without a restart.
    std::fs::copy(dir.join(&names[0]), dir.join("heapsample.1.000099.m0.prof")).unwrap();
    assert!(listed_ids(&listing(&server)).contains(&"heapsample.1.000099.m0.prof".to_string()));

    // Hostile requests.
    let secret = "root:x:0:0";
    let hostile = [
        "/pprof/../../../../etc/passwd",
        "/pprof/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/pprof/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
        "/pprof//etc/passwd",
        "/pprof/escape.prof",
        "/pprof/linked-dir/outside.prof",
        "/view?dump=/etc/passwd",
        "/view?dump=..%2F..%2Fetc%2Fpasswd",
        "/view?dump=escape.prof",
        "/view?dump=corrupt.prof",
        "/../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/view?dump=x&base=%00",
    ];
    for path in hostile {
        let (status, body) = server.get(path);
        assert!((400..500).contains(&status), "{path}: {status} {body}");
        assert!(!body.contains(secret), "{path} leaked a file");
    }
    // A query over 2 KiB is refused as too long before any work; one of
    // exactly 2 KiB is read (and names no dump).
    let too_long = format!("/view?dump={}", "a".repeat(2049 - "dump=".len()));
    assert_eq!(server.get(&too_long).0, 414, "a view query over 2 KiB");
    let too_long = format!(
        "/pprof/{}?base={}",
        names[0],
        "b".repeat(2049 - "base=".len())
    );
    assert_eq!(server.get(&too_long).0, 414, "a profile query over 2 KiB");
    let at_limit = format!("/view?dump={}", "a".repeat(2048 - "dump=".len()));
    assert_eq!(server.get(&at_limit).0, 404, "a query of 2 KiB");
    let huge = format!("/view?dump={}", "a".repeat(200_000));
    let (status, _) = server.get(&huge);
    assert!(
        (400..500).contains(&status) || status == 0,
        "huge query: {status}"
    );
    let first = &names[0];
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        let (status, _) = server.raw(&format!(
            "{method} /pprof/{first} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"
        ));
        assert_eq!(status, 405, "{method}");
    }
    let (status, _) = server.raw("GARBAGE\r\n\r\n");
    assert!(status == 0 || (400..500).contains(&status));
    assert!(server.alive(), "the server died");
    assert_eq!(listed_ids(&listing(&server)).len(), names.len() + 1);

    // go tool pprof on the served URL agrees with the text report.
    let exit_dump = names.iter().find(|n| n.contains(".f.")).expect("exit dump");
    let text = String::from_utf8_lossy(
        heapdiff_ok(&["--format", "text", dir.join(exit_dump).to_str().unwrap()]).as_bytes(),
    )
    .into_owned();
    let percent = text_total_percent(&text, "grow_cache");
    let pprof_url = format!("{}/pprof/{exit_dump}", server.url);
    let Some(top) = go_tool_pprof(
        &["-top", "-unit=B", "-sample_index=inuse_space"],
        &pprof_url,
        dir,
    ) else {
        return;
    };
    let row = top
        .lines()
        .find(|l| l.trim_end().ends_with(" grow_cache"))
        .unwrap_or_else(|| panic!("{top}"));
    let cum_percent: f64 = row
        .split_whitespace()
        .nth(4)
        .unwrap()
        .trim_end_matches('%')
        .parse()
        .unwrap();
    assert!(
        (cum_percent - percent).abs() < 0.1,
        "pprof {cum_percent}% vs text {percent}%\n{top}\n{text}"
    );
    let flat: f64 = row
        .split_whitespace()
        .next()
        .unwrap()
        .trim_end_matches('B')
        .parse()
        .unwrap();
    assert_eq!(flat, 8.0 * 16.0 * 65536.0, "grow_cache keeps 8 MiB: {row}");
}

/// The "sampled estimate: in use N bytes in M objects" numbers.
fn estimate(report: &str) -> (i64, i64) {
    let line = report
        .lines()
        .find(|l| l.contains("sampled estimate"))
        .expect("totals line");
    let numbers: Vec<i64> = line
        .split_whitespace()
        .filter_map(|w| w.trim_end_matches(',').parse().ok())
        .collect();
    (numbers[0], numbers[1])
}

#[test]
fn merge_sums_the_processes() {
    let program = compile_c("serve_growth.c", &BuildOptions::no_pie());
    let runs: Vec<Outcome> = (0..2)
        .map(|_| {
            let outcome = Run::program(&program)
                .with_shim()
                .prof_conf("lg_prof_sample:12")
                .run();
            outcome.assert_success();
            outcome
        })
        .collect();
    let dumps: Vec<String> = runs
        .iter()
        .map(|r| r.final_dump().0.path.to_str().unwrap().to_string())
        .collect();
    let texts: Vec<String> = dumps
        .iter()
        .map(|d| {
            String::from_utf8_lossy(heapdiff_ok(&["--format", "text", d]).as_bytes()).into_owned()
        })
        .collect();
    let merged = String::from_utf8_lossy(
        heapdiff_ok(&["merge", &dumps[0], &dumps[1], "-f", "text"]).as_bytes(),
    )
    .into_owned();
    let (bytes, objects) = estimate(&merged);
    let parts: Vec<(i64, i64)> = texts.iter().map(|t| estimate(t)).collect();
    assert!((bytes - parts[0].0 - parts[1].0).abs() <= 2, "{merged}");
    assert!((objects - parts[0].1 - parts[1].1).abs() <= 2, "{merged}");

    // The pprof output carries the same total.
    let out = runs[0].dir.path().join("fleet.pb.gz");
    heapdiff_ok(&["merge", &dumps[0], &dumps[1], "-o", out.to_str().unwrap()]);
    let merged_html = heapdiff(&[
        "merge",
        &dumps[0],
        &dumps[1],
        "-f",
        "html",
        "-o",
        runs[0].dir.path().join("fleet.html").to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&merged_html.stderr).into_owned();
    assert!(merged_html.status.success(), "{text}");
    assert!(text.contains("wrote"), "{text}");
    // The merged profile's in-use totals are the sum of the processes'
    // estimates (each sample rounded on its own: within a byte per sample).
    let profile = read_pprof(&out);
    let total = |name: &str| -> i64 {
        let index = profile
            .sample_type
            .iter()
            .position(|t| profile.string_table[t.r#type as usize] == name)
            .unwrap_or_else(|| panic!("no {name} in the profile"));
        profile.sample.iter().map(|s| s.value[index]).sum()
    };
    let rounding = profile.sample.len() as i64;
    let (bytes_sum, objects_sum) = (parts[0].0 + parts[1].0, parts[0].1 + parts[1].1);
    assert!(
        (total("inuse_space") - bytes_sum).abs() <= rounding,
        "{bytes_sum}"
    );
    assert!(
        (total("inuse_objects") - objects_sum).abs() <= rounding,
        "{objects_sum}"
    );
    let tid_key = profile
        .string_table
        .iter()
        .position(|s| s == "tid")
        .unwrap() as i64;
    let mut thread_ids: Vec<i64> = profile
        .sample
        .iter()
        .flat_map(|s| s.label.iter().filter(|l| l.key == tid_key).map(|l| l.num))
        .collect();
    thread_ids.sort();
    thread_ids.dedup();
    assert!(
        thread_ids.len() >= 2,
        "each process keeps its threads: {thread_ids:?}"
    );
    let svg = runs[0].dir.path().join("fleet.svg");
    heapdiff_ok(&[
        "merge",
        &dumps[0],
        &dumps[1],
        "-f",
        "svg",
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(
        std::fs::read_to_string(&svg)
            .unwrap()
            .contains("grow_cache")
    );
}
