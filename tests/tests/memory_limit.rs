//! The pre-OOM trigger (`prof_oom_pct`) in a real cgroup with a memory
//! limit: one dump per crossing of the threshold, re-armed below it.
//! Needs permission to create a cgroup (root, a writable hierarchy) in the
//! hierarchy that holds the memory controller: a machine has it on v1 or on
//! v2, never both, so the test of the other version is always a counted
//! skip (see `prerequisite`), as is any test this machine does not permit.

use std::path::{Path, PathBuf};

use heapsample_tests::*;

/// A memory cgroup made for one test, removed on drop.
struct Cgroup {
    dir: PathBuf,
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// This process's cgroup directory in the v1 memory hierarchy, if there
/// is one.
fn v1_memory_dir() -> Option<PathBuf> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cgroups.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        controllers
            .split(',')
            .any(|c| c == "memory")
            .then(|| path.to_string())
    })?;
    let dir = Path::new("/sys/fs/cgroup/memory").join(path.trim_start_matches('/'));
    dir.join("memory.limit_in_bytes").exists().then_some(dir)
}

/// This process's cgroup directory in the v2 hierarchy, if its memory
/// controller can be enabled for a child cgroup there.
fn v2_memory_dir() -> Option<PathBuf> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cgroups.lines().find_map(|line| line.strip_prefix("0::"))?;
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .iter()
        .map(|mount| Path::new(mount).join(path.trim_start_matches('/')))
        .find(|dir| {
            std::fs::read_to_string(dir.join("cgroup.controllers"))
                .is_ok_and(|controllers| controllers.split_whitespace().any(|c| c == "memory"))
        })
}

fn make_cgroup(parent: &Path, limit_file: &str, limit: u64) -> Result<Cgroup, String> {
    let dir = parent.join(format!("heapsample-test-{}", std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    let cgroup = Cgroup { dir };
    std::fs::write(cgroup.dir.join(limit_file), limit.to_string())
        .map_err(|e| format!("setting {limit_file}: {e}"))?;
    Ok(cgroup)
}

/// Runs memory_hog (peaks of 48 MiB, a trough of 8 MiB) in the cgroup with
/// a 64 MiB limit and prof_oom_pct:50: the 32 MiB threshold is crossed
/// twice, so exactly two `o` dumps, each holding the blocks live then.
fn two_crossings(cgroup: &Cgroup) {
    let program = compile_c("memory_hog.c", &BuildOptions::no_pie());
    let procs = cgroup.dir.join("cgroup.procs");
    let outcome = Run::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > '{}' && exec '{}' 48 8",
            procs.display(),
            program.path.display()
        ))
        .with_shim()
        .prof_conf("prof_oom_pct:50")
        .timeout(std::time::Duration::from_secs(60))
        .run();
    outcome.assert_success();
    assert!(
        outcome.stdout.contains("second peak"),
        "{}",
        outcome.context()
    );
    let oom: Vec<(DumpFile, format::Dump)> = outcome
        .dumps()
        .into_iter()
        .filter(|(file, _)| file.trigger == "o")
        .collect();
    let names: Vec<&str> = oom.iter().map(|(f, _)| f.name.as_str()).collect();
    assert_eq!(oom.len(), 2, "{names:?}\n{}", outcome.context());
    for (file, dump) in &oom {
        assert_eq!(dump.trigger, format::Trigger::MemoryLimit, "{}", file.name);
        // The live heap at the crossing: at least ~24 MiB of the blocks
        // (the cgroup also counts the program's other pages).
        let live: u64 = dump.stacks.iter().map(|s| s.live_bytes).sum();
        assert!(live >= 8 << 20, "{}: {live} live bytes sampled", file.name);
    }
}

#[test]
fn pre_oom_dumps_in_a_v1_memory_cgroup() {
    let Some(parent) = v1_memory_dir() else {
        return skip(Missing::Privilege(
            "no cgroup v1 memory hierarchy for this process",
        ));
    };
    match make_cgroup(&parent, "memory.limit_in_bytes", 64 << 20) {
        Ok(cgroup) => two_crossings(&cgroup),
        Err(why) => skip(Missing::Privilege(&format!(
            "cannot create a v1 memory cgroup: {why}"
        ))),
    }
}

#[test]
fn pre_oom_dumps_in_a_v2_memory_cgroup() {
    let Some(parent) = v2_memory_dir() else {
        return skip(Missing::Privilege(
            "the cgroup v2 memory controller is not available here \
             (memory is on v1, or cgroup2 is not mounted)",
        ));
    };
    match make_cgroup(&parent, "memory.max", 64 << 20) {
        Ok(cgroup) => two_crossings(&cgroup),
        Err(why) => skip(Missing::Privilege(&format!(
            "cannot create a v2 memory cgroup: {why}"
        ))),
    }
}

/// Without any limit, one warning and the program runs as usual.
#[test]
fn no_limit_is_one_warning() {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let limit = heapsample_recorder::memory_limit::find_limit(
        &read("/proc/self/cgroup"),
        &read("/proc/self/mountinfo"),
        |path| std::fs::read_to_string(path).ok(),
    );
    if let Some(watched) = limit {
        return skip(Missing::Privilege(&format!(
            "this process's cgroup has a memory limit ({} bytes, {})",
            watched.limit,
            watched.usage.display()
        )));
    }
    let program = compile_c("memory_hog.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program)
        .args(["2", "1"])
        .with_shim()
        .prof_conf("prof_oom_pct:90")
        .run();
    outcome.assert_success();
    let lines = outcome.heapsample_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("prof_oom_pct"), "{lines:?}");
}
