//! What `heapdiff -o PATH` (and `merge -o`) does with what is already at
//! PATH, on real files, devices, FIFOs, descriptors and links:
//!
//! - a character device (a `mknod` node, and `/dev/null` itself as root in a
//!   private mount namespace) is written into and stays a device;
//! - a FIFO is written into while another process reads it, and stays a
//!   FIFO;
//! - `/dev/fd/N`, `-o >(cmd)` and `/dev/stdout` appended to by the shell get
//!   the output through the descriptor (what was there before stays);
//! - a symbolic link to a regular file stays a link, its target gets the
//!   output (keeping its permissions); a link to nothing, a directory, a
//!   block device and a socket are refused with one line and exit status 2;
//! - a heapsample dump without a single allocation is described by the text
//!   report as a heapsample dump, not as a foreign profile.

use heapsample_tests::*;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A real dump (of a program that allocates nothing) in a fresh directory.
fn empty_dump() -> (Outcome, PathBuf) {
    let program = compile_c("no_allocations.c", &BuildOptions::no_pie());
    let outcome = Run::program(&program).with_shim().run();
    outcome.assert_success();
    let path = outcome.final_dump().0.path;
    (outcome, path)
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The text report on stdout, the reference for what every target gets.
fn text_report(dump: &Path) -> String {
    heapdiff_ok(&[s(dump), "-f", "text"])
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `heapdiff DUMP -f text -o TARGET` is refused: exit status 2 and one line
/// naming the target with `why` in it.
fn assert_refused(dump: &Path, target: &Path, why: &str) {
    let out = heapdiff(&[s(dump), "-f", "text", "-o", s(target)]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert_eq!(text.lines().count(), 1, "one line: {text}");
    assert!(
        text.starts_with(&format!("heapdiff: {}: ", target.display())) && text.contains(why),
        "{text}"
    );
}

/// `mknod PATH TYPE MAJOR MINOR`; false (a skip) without the privilege.
fn mknod(path: &Path, kind: &str, major: u32, minor: u32) -> bool {
    let made = Command::new("mknod")
        .args([s(path), kind, &major.to_string(), &minor.to_string()])
        .status()
        .is_ok_and(|status| status.success());
    if !made {
        skip(Missing::Privilege(
            "mknod is not permitted here (not root?)",
        ));
    }
    made
}

#[test]
fn an_empty_heapsample_dump_is_described_as_one() {
    let (outcome, dump) = empty_dump();
    let (_, contents) = outcome.final_dump();
    assert_eq!(contents.totals.allocations, 0, "the program allocated");
    let text = text_report(&dump);
    assert!(!text.contains("foreign"), "{text}");
    assert!(
        text.contains("totals: exact counters:   allocated 0 bytes in 0 allocations"),
        "{text}"
    );
}

#[test]
fn a_device_node_is_written_into_and_stays_a_device() {
    let (outcome, dump) = empty_dump();
    let null = outcome.dir.path().join("null");
    if !mknod(&null, "c", 1, 3) {
        return;
    }
    let before = outcome.dir.entries();
    heapdiff_ok(&[s(&dump), "-f", "text", "-o", s(&null)]);
    heapdiff_ok(&["merge", s(&dump), s(&dump), "-f", "text", "-o", s(&null)]);
    let metadata = std::fs::symlink_metadata(&null).unwrap();
    assert!(metadata.file_type().is_char_device(), "{metadata:?}");
    assert_eq!(metadata.rdev(), libc::makedev(1, 3));
    assert_eq!(outcome.dir.entries(), before, "no file added or left");
}

#[test]
fn dev_null_stays_a_device_as_root() {
    let (_outcome, dump) = empty_dump();
    // A private mount namespace with its own /dev, so the machine's
    // /dev/null is out of reach whatever happens.
    let script = r#"mount -t tmpfs heapdiff-test /dev && mknod -m 666 /dev/null c 1 3 || exit 77
"$0" "$1" -f text -o /dev/null || exit 1
stat -c '%F %t:%T' /dev/null"#;
    if !heapsample_tests::prerequisite::command_succeeds("unshare", &["--mount", "true"]) {
        skip(Missing::Privilege(
            "no private mount namespace here (not root?)",
        ));
        return;
    }
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", script])
        .arg(heapdiff_path())
        .arg(&dump)
        .output()
        .expect("run unshare");
    if out.status.code() == Some(77) {
        skip(Missing::Privilege("cannot mount a /dev of its own here"));
        return;
    }
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "character special file 1:3"
    );
}

#[test]
fn a_fifo_is_written_into_while_another_process_reads_it() {
    let (outcome, dump) = empty_dump();
    let fifo = outcome.dir.path().join("report.fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success(),
        "mkfifo"
    );
    let reader = Command::new("cat")
        .arg(&fifo)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start cat");
    heapdiff_ok(&[s(&dump), "-f", "text", "-o", s(&fifo)]);
    // A FIFO replaced by a file would leave cat waiting for a writer
    // forever: give it a minute.
    let mut reader = reader;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while reader.try_wait().expect("cat").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = reader.kill();
            panic!("the FIFO's reader got no end of stream (the FIFO was replaced?)");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let read = reader.wait_with_output().expect("cat");
    assert_eq!(String::from_utf8_lossy(&read.stdout), text_report(&dump));
    let metadata = std::fs::symlink_metadata(&fifo).unwrap();
    assert!(metadata.file_type().is_fifo(), "{metadata:?}");
}

#[test]
fn descriptors_get_the_output_through_the_shell_s_redirections() {
    let (outcome, dump) = empty_dump();
    let dir = outcome.dir.path();
    let report = text_report(&dump);
    let script = r#"set -e
"$0" "$1" -f text -o /dev/fd/3 3>fd3.txt
"$0" "$1" -f text -o >(cat > substituted.txt); wait $!
echo "earlier line" > appended.txt
"$0" "$1" -f text -o /dev/stdout >> appended.txt
"$0" merge "$1" -f text -o /proc/self/fd/4 4>merged.txt"#;
    let out = Command::new("bash")
        .args(["-c", script])
        .arg(heapdiff_path())
        .arg(&dump)
        .current_dir(dir)
        .output()
        .expect("run bash");
    assert!(out.status.success(), "{}", stderr(&out));
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    assert_eq!(read("fd3.txt"), report);
    assert_eq!(read("substituted.txt"), report);
    assert_eq!(read("appended.txt"), format!("earlier line\n{report}"));
    assert!(
        read("merged.txt").contains("dumps merged"),
        "{}",
        read("merged.txt")
    );
    assert!(
        std::fs::read_dir(dir).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".tmp")),
        "no temporary file left"
    );
}

#[test]
fn a_link_is_written_through_and_kept() {
    let (outcome, dump) = empty_dump();
    let dir = outcome.dir.path();
    let target = dir.join("target.txt");
    std::fs::write(&target, "old\n").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
    let link = dir.join("link.txt");
    std::os::unix::fs::symlink("target.txt", &link).unwrap();
    heapdiff_ok(&[s(&dump), "-f", "text", "-o", s(&link)]);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("target.txt"));
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        text_report(&dump)
    );
    let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640, "the target keeps its permissions");

    // A link to nothing: refused, nothing created through it.
    let dangling = dir.join("dangling.txt");
    std::os::unix::fs::symlink("absent/nothing.txt", &dangling).unwrap();
    assert_refused(&dump, &dangling, "a symbolic link to nothing");
    assert!(!dir.join("absent").exists());
    assert!(
        std::fs::symlink_metadata(&dangling)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn directories_block_devices_and_sockets_are_refused() {
    let (outcome, dump) = empty_dump();
    let dir = outcome.dir.path();
    let subdirectory = dir.join("sub");
    std::fs::create_dir(&subdirectory).unwrap();
    assert_refused(&dump, &subdirectory, "is a directory");
    let socket = dir.join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    assert_refused(&dump, &socket, "is a socket");
    assert!(
        std::fs::symlink_metadata(&socket)
            .unwrap()
            .file_type()
            .is_socket()
    );
    assert_refused(&dump, &dir.join("missing/out.txt"), "no such directory");
    let block = dir.join("block");
    if mknod(&block, "b", 7, 0) {
        assert_refused(&dump, &block, "is a block device");
        assert!(
            std::fs::symlink_metadata(&block)
                .unwrap()
                .file_type()
                .is_block_device()
        );
    }
}
