//! Safety of what the shim writes: mode 0600, symlinks planted at
//! the temporary or final name are not followed, the prefix's directory is
//! never created, and a full disk leaves no file under the final name, one
//! warning, and a later dump that succeeds.

mod hostile_common;
use heapsample_tests::*;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

fn program() -> Program {
    compile_c("hostile_writer.c", &BuildOptions::no_pie())
}

#[test]
fn dumps_are_mode_0600_even_with_umask_0() {
    let outcome = Run::program(&program()).arg("umask0").with_shim().run();
    outcome.assert_success();
    assert!(
        outcome.stdout.contains("manual dump 0"),
        "{}",
        outcome.context()
    );
    let (file, _) = outcome.final_dump();
    for path in [file.path.clone(), outcome.dir.path().join("manual.prof")] {
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} has mode {mode:o}", path.display());
    }
}

#[test]
fn planted_symlinks_are_not_followed() {
    let victims = TempDir::new("victims");
    let v1 = victims.path().join("victim1");
    let v2 = victims.path().join("victim2");
    let absent = victims.path().join("must-not-exist");
    std::fs::write(&v1, "VICTIM ONE\n").unwrap();
    std::fs::write(&v2, "VICTIM TWO\n").unwrap();
    let outcome = Run::program(&program())
        .arg("plant")
        .arg(&v1)
        .arg(&v2)
        .arg(&absent)
        .with_shim()
        .run();
    outcome.assert_success();
    assert!(
        outcome.stdout.contains("automatic 0 explicit 0"),
        "{}",
        outcome.context()
    );
    assert_eq!(std::fs::read_to_string(&v1).unwrap(), "VICTIM ONE\n");
    assert_eq!(std::fs::read_to_string(&v2).unwrap(), "VICTIM TWO\n");
    assert!(!absent.exists(), "a dangling planted link was followed");
    // The dumps replaced the links with regular files that decode.
    for name in [
        "explicit.prof".to_string(),
        format!("heapsample.{}.000000.m0.prof", outcome.pid),
        format!("heapsample.{}.000002.f.prof", outcome.pid),
    ] {
        let path = outcome.dir.path().join(&name);
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_file(), "{name} is not a regular file");
        let bytes = std::fs::read(&path).unwrap();
        format::decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn missing_prefix_directory_is_not_created() {
    let base = TempDir::new("noprefix");
    let missing = base.path().join("missing").join("deeper");
    let outcome = Run::program(&program())
        .arg("plain")
        .with_shim()
        .prof_conf(format!("prof_prefix:{}/x", missing.display()))
        .run();
    outcome.assert_success();
    let lines = outcome.heapsample_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        !base.path().join("missing").exists(),
        "the shim created a directory"
    );
    assert!(base.entries().is_empty());
}

struct Mount(std::path::PathBuf);
impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A 256 KiB tmpfs nearly filled by a filler file: the first two manual
/// dumps fail (ENOSPC) with one warning in all and no file under the final
/// name or a temporary name; after the program removes the filler, the third
/// succeeds. Needs `mount` (root): a counted skip where it is not permitted.
#[test]
fn full_disk_mid_dump() {
    let base = TempDir::new("tmpfs");
    let mnt = base.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&mnt)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !mounted {
        return skip(Missing::Privilege("cannot mount a tmpfs here (needs root)"));
    }
    let _guard = Mount(mnt.clone());
    let filler = mnt.join("filler");
    // Fill all but ~1 KiB, smaller than any dump.
    let _ = Command::new("dd")
        .args(["if=/dev/zero", "bs=1k", "count=10000"])
        .arg(format!("of={}", filler.display()))
        .output();
    let outcome = Run::program(&program())
        .arg("retry")
        .arg(&filler)
        .with_shim()
        .prof_conf(format!("prof_prefix:{}/hs,lg_prof_sample:8", mnt.display()))
        .run();
    outcome.assert_success();
    assert!(
        outcome
            .stdout
            .contains("first No space left on device second No space left on device third ok"),
        "{}",
        outcome.context()
    );
    let lines = outcome.heapsample_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let names: Vec<String> = std::fs::read_dir(&mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains(".tmp.")), "{names:?}");
    let pid = outcome.pid;
    assert!(
        !names.contains(&format!("hs.{pid}.000000.m0.prof")),
        "{names:?}"
    );
    assert!(
        !names.contains(&format!("hs.{pid}.000001.m1.prof")),
        "{names:?}"
    );
    let third = mnt.join(format!("hs.{pid}.000002.m2.prof"));
    format::decode(&std::fs::read(&third).unwrap()).unwrap();
}

struct RemoveOnDrop(std::path::PathBuf);
impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Secure execution: a setgid copy of the program run as root gets
/// AT_SECURE=1. ld.so then ignores LD_PRELOAD entries with a slash, so the
/// shim is copied (set-user-ID bit on, as ld.so requires) into the trusted
/// directory under a unique name for the duration of the test. The shim is
/// loaded, profiles nothing and writes nothing (heapsample_dump returns
/// ENOTSUP); the same copy without the setgid bit profiles (the control).
#[test]
fn secure_execution_profiles_nothing() {
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } != 0 {
        return skip(Missing::Privilege(
            "needs root (setgid copy and the trusted library directory)",
        ));
    }
    let trusted = std::path::Path::new("/usr/lib/x86_64-linux-gnu");
    let name = format!("libheapsample-sectest-{}.so", std::process::id());
    let lib = trusted.join(&name);
    std::fs::copy(shim_path(), &lib).expect("copy the shim into the trusted directory");
    let _cleanup = RemoveOnDrop(lib.clone());
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let bin_dir = TempDir::new("setgid");
    let copy = bin_dir.path().join("writer-setgid");
    std::fs::copy(&program().path, &copy).unwrap();
    let chgrp = Command::new("chgrp")
        .arg("nogroup")
        .arg(&copy)
        .status()
        .unwrap();
    assert!(chgrp.success());
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o2755)).unwrap();
    let secure = Run::new(&copy)
        .arg("secure")
        .env("LD_PRELOAD", &name)
        .env("PROF_CONF", "lg_prof_sample:0,prof_leak:true")
        .run();
    secure.assert_success();
    assert!(
        secure.stdout.contains("at_secure 1 shim_loaded 1"),
        "{}",
        secure.context()
    );
    assert!(
        secure.stdout.contains(&format!("dump {}", libc::ENOTSUP)),
        "{}",
        secure.context()
    );
    assert!(secure.stderr.is_empty(), "{}", secure.context());
    assert!(secure.dir.entries().is_empty(), "{}", secure.context());
    // Control: without the setgid bit the same setup profiles.
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    let control = Run::new(&copy).arg("secure").env("LD_PRELOAD", &name).run();
    control.assert_success();
    assert!(
        control.stdout.contains("at_secure 0 shim_loaded 1"),
        "{}",
        control.context()
    );
    assert!(control.stdout.contains("dump 0"), "{}", control.context());
    let _ = control.final_dump();
}
