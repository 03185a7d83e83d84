//! `prof_interval_s`: dumps by wall time (`t<n>`), and none from a process
//! that went quiet (nothing sampled and no sampled block freed since the
//! previous time dump); each dump's cost counts the dumps before it.

use heapsample_tests::format::Trigger;
use heapsample_tests::{BuildOptions, Run, TempDir, compile_c, dump_files_in, shim_path};

#[test]
fn time_dumps_come_each_period_and_stop_when_the_process_is_quiet() {
    let program = compile_c("time_quiet.c", &BuildOptions::no_pie());
    let dir = TempDir::new("time-dumps");
    let outcome = Run::new(&program.path)
        .args(["3", "4"])
        .env("LD_PRELOAD", shim_path())
        .env(
            "PROF_CONF",
            format!(
                "prof_interval_s:1,lg_prof_sample:12,prof_prefix:{}/heapsample",
                dir.path().display()
            ),
        )
        .run();
    assert!(outcome.status.success(), "{}", outcome.context());
    let quiet_ns = (outcome
        .stdout
        .trim()
        .strip_prefix("idle_from ")
        .and_then(|t| t.parse::<f64>().ok())
        .expect("the program says when it went quiet")
        * 1e9) as u64;
    let all: Vec<_> = dump_files_in(dir.path())
        .iter()
        .map(|file| (file.path.clone(), file.decode()))
        .collect();
    // Each dump's cost counts the dumps written before it, as on disk.
    let mut bytes_before = 0;
    for (path, dump) in &all {
        assert_eq!(dump.cost.dumps_written, dump.seq, "{}", path.display());
        assert_eq!(dump.cost.dump_bytes, bytes_before, "{}", path.display());
        assert_eq!(dump.cost.dump_ns > 0, dump.seq > 0, "{}", path.display());
        bytes_before += std::fs::metadata(path).unwrap().len();
    }
    let dumps: Vec<_> = all
        .into_iter()
        .filter(|(_, dump)| dump.trigger == Trigger::Time)
        .collect();
    assert!(!dumps.is_empty(), "{}", outcome.context());
    for (index, (path, dump)) in dumps.iter().enumerate() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.ends_with(&format!(".t{index}.prof")), "{name}");
        assert_eq!(dump.trigger_seq, index as u64, "{name}");
    }
    // At most the first tick after the last change writes one; the four
    // quiet seconds hold three more ticks, which write nothing. (A tick is
    // at most a period late; 1.5 s leaves half a period for a loaded
    // machine's wake-up.)
    let late: Vec<_> = dumps
        .iter()
        .filter(|(_, dump)| dump.time_unix_ns > quiet_ns + 1_500_000_000)
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert!(late.is_empty(), "time dumps of a quiet process: {late:?}");
}
