//! Attaching from the host to a process in a container: pid 1 of its own
//! PID and mount namespaces, chrooted into a root that holds only the
//! program and its libraries (made here with `unshare`, no daemon). The
//! library reaches it as a sealed in-memory file, its dumps come to the
//! host's `-o` directory at each dump and at detach with the modules they
//! need, nothing is left in the container, the program's output and exit
//! status are unchanged, and the dumps still name the allocating function
//! with file and line once the container's root is gone. Also in a user
//! namespace made by an unprivileged user, with a read-only root, and the
//! refusal when the container has nowhere to write; a 4-thread C++
//! program too.

mod attach_common;

use std::path::{Path, PathBuf};

use attach_common::{Driven, heapsample, heapsample_ok, stderr_of, unattached};
use heapsample_tests::{
    BuildOptions, Missing, TempDir, compile_c, go_tool_pprof, heapdiff_ok, skip,
};

const COMMANDS: &[&str] = &["leak 200", "hold 300", "leak 100", "release", "end"];

/// A root holding `program` (as `/app`) and the shared objects it loads.
fn container_root(dir: &Path, program: &Path) -> PathBuf {
    let root = dir.join("root");
    for sub in ["proc", "tmp"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    std::fs::copy(program, root.join("app")).unwrap();
    let ldd = std::process::Command::new("ldd")
        .arg(program)
        .output()
        .unwrap();
    for library in String::from_utf8_lossy(&ldd.stdout)
        .split_whitespace()
        .filter(|word| word.starts_with('/'))
    {
        let inside = root.join(library.trim_start_matches('/'));
        std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
        std::fs::copy(library, &inside).unwrap();
    }
    // Readable by an unprivileged user's container too.
    let _ = std::process::Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(dir)
        .status();
    root
}

/// True when this machine lets the test make namespaces; otherwise the
/// test is recorded as skipped.
fn namespaces_allowed() -> bool {
    let made = std::process::Command::new("unshare")
        .args(["--pid", "--mount", "--fork", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        skip(Missing::Privilege(
            "cannot make PID and mount namespaces (unshare)",
        ));
    }
    made
}

/// Start `/app` in `root` as pid 1 of new PID and mount namespaces, after
/// `setup` (shell commands run inside the namespaces before the chroot).
fn start_in_container(root: &Path, setup: &str, prefix: &[&str]) -> Driven {
    let root = root.to_str().unwrap();
    let setup = setup.replace("$ROOT", root);
    let script = format!("{setup} mount -t proc proc {root}/proc && exec chroot {root} /app");
    let mut args: Vec<&str> = prefix.to_vec();
    args.extend(["unshare", "--pid", "--mount", "--fork", "sh", "-c", &script]);
    Driven::start(Path::new(args[0]), &args[1..], &[])
}

/// The host pid of the process whose parent is `parent` (the container's
/// pid 1 under `unshare --fork`).
fn child_of(parent: i32) -> i32 {
    for _ in 0..200 {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest.split_whitespace().collect())
                .unwrap_or_default();
            if fields.get(1) == Some(&parent.to_string().as_str()) {
                let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
                if comm.trim() == "app" {
                    return pid;
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("no /app process under {parent}");
}

fn dumps_in(dir: &Path) -> Vec<PathBuf> {
    let mut dumps: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    dumps.retain(|p| p.extension().is_some_and(|e| e == "prof"));
    dumps.sort();
    dumps
}

/// Attach, dump twice, `cycles` more detach/attach cycles, detach; the
/// program ends as it would have; the host holds named dumps.
fn profile_in_container(setup: &str, prefix: &[&str], cycles: usize) {
    let work = TempDir::new("container");
    let program = compile_c("attach_leaker.c", &BuildOptions::pie()).path;
    let root = container_root(work.path(), &program);
    let expected = unattached(&program, &[], &[], COMMANDS);
    let host = work.path().join("dumps");
    let mut driven = start_in_container(&root, setup, prefix);
    assert_eq!(driven.send(COMMANDS[0]), "leaked 200");
    // `setpriv` and `unshare` exec each other in place: the driven pid is
    // the last unshare's, whose forked child becomes the container's pid 1.
    let pid = child_of(driven.pid()).to_string();
    let attached = heapsample_ok(&[
        "attach",
        "-o",
        host.to_str().unwrap(),
        "--lg-sample",
        "12",
        &pid,
    ]);
    assert!(attached.contains("pid 1 in its container"), "{attached}");
    assert_eq!(driven.send(COMMANDS[1]), "holding 300");
    let mut written = Vec::new();
    for _ in 0..2 {
        let path = PathBuf::from(heapsample_ok(&["dump", &pid]).trim());
        assert!(
            path.starts_with(&host),
            "the dump is on the host: {}",
            path.display()
        );
        assert!(path.is_file(), "{}", path.display());
        assert!(
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("heapsample.{pid}.")),
            "named by the host pid: {}",
            path.display()
        );
        written.push(path);
    }
    let status = heapsample_ok(&["status", &pid]);
    assert!(status.contains("brought to"), "{status}");
    for _ in 0..cycles {
        heapsample_ok(&["detach", &pid]);
        heapsample_ok(&[
            "attach",
            "-o",
            host.to_str().unwrap(),
            "--lg-sample",
            "12",
            &pid,
        ]);
    }
    assert_eq!(driven.send(COMMANDS[2]), "leaked 300");
    heapsample_ok(&["detach", &pid]);
    let inside: Vec<_> = std::fs::read_dir(root.join("tmp"))
        .unwrap()
        .flatten()
        .collect();
    assert!(
        inside.is_empty(),
        "nothing left in the container: {inside:?}"
    );
    for command in &COMMANDS[3..COMMANDS.len() - 1] {
        driven.send(command);
    }
    driven.send_only("end");
    let (transcript, exit) = driven.finish();
    assert_eq!(transcript, expected.0, "the program's output is unchanged");
    assert_eq!(exit.code(), expected.1.code(), "and its exit status");
    assert!(dumps_in(&host).len() >= 2, "{:?}", dumps_in(&host));

    // The container's root is gone; the dumps still name the leak.
    std::fs::remove_dir_all(&root).unwrap();
    let dump = written[1].to_str().unwrap();
    let text = heapdiff_ok(&["-f", "text", dump]);
    assert!(text.contains("hold_blocks"), "{text}");
    let pprof = work.path().join("dump.pb.gz");
    heapdiff_ok(&["-f", "pprof", "-o", pprof.to_str().unwrap(), dump]);
    if let Some(lines) = go_tool_pprof(&["-lines", "-top"], &pprof, work.path()) {
        assert!(lines.contains("attach_leaker.c:"), "file and line: {lines}");
    }
}

#[test]
fn a_chrooted_pid_1_is_profiled_from_the_host() {
    if namespaces_allowed() {
        profile_in_container("", &[], 20);
    }
}

#[test]
fn an_unprivileged_user_namespace_is_profiled_from_the_host() {
    if !namespaces_allowed() {
        return;
    }
    profile_in_container(
        "",
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "unshare",
            "--user",
            "--map-root-user",
            "--",
        ],
        2,
    );
}

#[test]
fn a_read_only_root_with_a_writable_tmp_is_profiled() {
    if namespaces_allowed() {
        profile_in_container(
            "mount --bind $ROOT $ROOT && mount -o remount,bind,ro $ROOT && mount -t tmpfs tmpfs $ROOT/tmp &&",
            &[],
            2,
        );
    }
}

#[test]
fn a_container_with_nowhere_to_write_is_refused_and_unchanged() {
    if !namespaces_allowed() {
        return;
    }
    let work = TempDir::new("container-ro");
    let program = compile_c("attach_leaker.c", &BuildOptions::pie()).path;
    let root = container_root(work.path(), &program);
    let expected = unattached(&program, &[], &[], COMMANDS);
    let mut driven = start_in_container(
        &root,
        "mount --bind $ROOT $ROOT && mount -o remount,bind,ro $ROOT &&",
        &[],
    );
    assert_eq!(driven.send(COMMANDS[0]), "leaked 200");
    let pid = child_of(driven.pid()).to_string();
    let host = work.path().join("dumps");
    let refused = heapsample(&["attach", "-o", host.to_str().unwrap(), &pid]);
    assert_eq!(refused.status.code(), Some(1));
    let message = stderr_of(&refused);
    assert!(
        message.contains("no writable /tmp, /dev/shm or /var/tmp")
            && message.contains("nothing was changed"),
        "{message}"
    );
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    assert!(
        !maps.contains("libheapsample"),
        "the library was not loaded"
    );
    for command in &COMMANDS[1..COMMANDS.len() - 1] {
        driven.send(command);
    }
    driven.send_only("end");
    let (transcript, exit) = driven.finish();
    assert_eq!(transcript, expected.0);
    assert_eq!(exit.code(), expected.1.code());
}

#[test]
fn a_four_thread_cxx_program_in_a_container_is_profiled_from_the_host() {
    if !namespaces_allowed() {
        return;
    }
    let work = TempDir::new("container-cxx");
    let program = heapsample_tests::compile_cxx("attach_cxx.cpp", &BuildOptions::pie()).path;
    let root = container_root(work.path(), &program);
    let commands = ["start", "stop", "end"];
    let expected = unattached(&program, &[], &[], &commands);
    let host = work.path().join("dumps");
    let mut driven = start_in_container(&root, "", &[]);
    assert_eq!(driven.send("start"), "started");
    let pid = child_of(driven.pid()).to_string();
    let attach = [
        "attach",
        "-o",
        host.to_str().unwrap(),
        "--lg-sample",
        "14",
        &pid,
    ];
    heapsample_ok(&attach);
    let first = PathBuf::from(heapsample_ok(&["dump", &pid]).trim());
    for _ in 0..20 {
        heapsample_ok(&["detach", &pid]);
        heapsample_ok(&attach);
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let last = PathBuf::from(heapsample_ok(&["dump", &pid]).trim());
    heapsample_ok(&["detach", &pid]);
    assert_eq!(driven.send("stop"), "thread 0 ok");
    driven.send_only("end");
    let (transcript, exit) = driven.finish();
    assert_eq!(transcript, expected.0, "the program's output is unchanged");
    assert_eq!(exit.code(), expected.1.code(), "and its exit status");
    assert!(first.is_file() && last.is_file() && last.starts_with(&host));
    let inside: Vec<_> = std::fs::read_dir(root.join("tmp"))
        .unwrap()
        .flatten()
        .collect();
    assert!(
        inside.is_empty(),
        "nothing left in the container: {inside:?}"
    );
    std::fs::remove_dir_all(&root).unwrap();
    // What the threads allocated since the attach (they free it at once,
    // so the in-use view of a dump may hold nothing).
    let text = heapdiff_ok(&[
        "-f",
        "text",
        "-m",
        "alloc-space",
        "--all-mine",
        last.to_str().unwrap(),
    ]);
    assert!(text.contains("round_of_work"), "{text}");
}
