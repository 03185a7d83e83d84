//! The `-o` directory of an attach, made for the process that writes into
//! it: the dumps are written by the target with its own credentials, not
//! by this command, which often runs as root while the target runs as a
//! service's user.
//!
//! Missing directories are created and, when this command may, given to
//! the target's file-system user and group (so a root `heapsample attach`
//! on a `postgres` process makes a directory `postgres` writes into).
//! Then the target's credentials (fsuid, fsgid, supplementary groups, as
//! `/proc/PID/status` shows them) must be able to reach the directory
//! (search every directory above it) and write into it; otherwise the
//! attach is refused before anything is changed in the target, saying
//! what to do. Permission bits are judged as the kernel judges them for
//! an unprivileged user (owner, then group, then others); access control
//! lists and capabilities of the target are not looked at, so a target
//! they would let through may be refused (never the other way round,
//! unless an ACL or a security module denies what the bits allow).

use std::os::unix::fs::{MetadataExt, chown};
use std::path::{Path, PathBuf};

use crate::Failure;
use crate::inject::{Credentials, Process};

/// Make `dir` (absolute) ready for the dumps of `process`.
pub fn prepare(dir: &Path, process: Process, name: &str) -> Result<(), Failure> {
    let credentials = process
        .credentials()
        .ok_or_else(|| Failure::new(format!("process {} exited", process.0)))?;
    let who = format!(
        "process {} ({name}) runs as uid {} gid {}",
        process.0, credentials.uid, credentials.gid
    );
    for created in create_missing(dir)? {
        give(&created, &credentials)?;
    }
    for above in dir.ancestors().skip(1) {
        let metadata = std::fs::metadata(above)
            .map_err(|e| Failure::new(format!("cannot read {}: {e}", above.display())))?;
        if !credentials.may(&metadata, SEARCH) {
            return Err(Failure::new(format!(
                "{who}, which cannot reach {} ({} is mode {:o}, owner uid {}): name a directory \
                 it can reach with -o (e.g. under /tmp); nothing was changed",
                dir.display(),
                above.display(),
                metadata.mode() & 0o7777,
                metadata.uid()
            )));
        }
    }
    let metadata = std::fs::metadata(dir)
        .map_err(|e| Failure::new(format!("cannot read {}: {e}", dir.display())))?;
    if !metadata.is_dir() {
        return Err(Failure::new(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    if !credentials.may(&metadata, WRITE | SEARCH) {
        return Err(Failure::new(format!(
            "{who}, which cannot write into {} (mode {:o}, owner uid {} gid {}): give it the \
             directory (chown {}:{} {}) or name a new one with -o, which heapsample creates \
             owned by the process's user; nothing was changed",
            dir.display(),
            metadata.mode() & 0o7777,
            metadata.uid(),
            metadata.gid(),
            credentials.uid,
            credentials.gid,
            dir.display()
        )));
    }
    Ok(())
}

const WRITE: u32 = 0o2;
const SEARCH: u32 = 0o1;

impl Credentials {
    /// May these credentials access a file with `metadata` for `wanted`
    /// (permission bits: 4 read, 2 write, 1 search)?
    fn may(&self, metadata: &std::fs::Metadata, wanted: u32) -> bool {
        if self.uid == 0 {
            return true;
        }
        let mode = metadata.mode();
        let bits = if metadata.uid() == self.uid {
            mode >> 6
        } else if metadata.gid() == self.gid || self.groups.contains(&metadata.gid()) {
            mode >> 3
        } else {
            mode
        };
        bits & wanted == wanted
    }
}

/// Create the directories of `dir` that are missing, outermost first;
/// returns those it created.
fn create_missing(dir: &Path) -> Result<Vec<PathBuf>, Failure> {
    let missing: Vec<&Path> = dir.ancestors().take_while(|p| !p.exists()).collect();
    let mut created = Vec::new();
    for path in missing.into_iter().rev() {
        match std::fs::create_dir(path) {
            Ok(()) => created.push(path.to_path_buf()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(Failure::new(format!(
                    "cannot create {}: {e}",
                    path.display()
                )));
            }
        }
    }
    Ok(created)
}

/// Give a directory this command created to the target's user and group,
/// when they are not this command's and it may (as root).
fn give(path: &Path, credentials: &Credentials) -> Result<(), Failure> {
    // SAFETY: geteuid and getegid have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if (credentials.uid, credentials.gid) == (uid, gid) || uid != 0 {
        return Ok(());
    }
    chown(path, Some(credentials.uid), Some(credentials.gid)).map_err(|e| {
        Failure::new(format!(
            "cannot give {} to uid {} gid {}: {e}",
            path.display(),
            credentials.uid,
            credentials.gid
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(uid: u32, gid: u32, groups: &[u32]) -> Credentials {
        Credentials {
            uid,
            gid,
            groups: groups.to_vec(),
        }
    }

    #[test]
    fn bits_are_judged_owner_then_group_then_others() {
        let dir = std::env::temp_dir().join(format!("heapsample-outdir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let metadata = std::fs::metadata(&dir).unwrap();
        let (owner, group) = (metadata.uid(), metadata.gid());
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o750)).unwrap();
        let metadata = std::fs::metadata(&dir).unwrap();
        let stranger = 4_000_000;
        assert!(
            credentials(owner.max(1), group, &[]).may(&metadata, WRITE | SEARCH) == (owner != 0)
        );
        assert!(credentials(stranger, group, &[]).may(&metadata, SEARCH));
        assert!(!credentials(stranger, group, &[]).may(&metadata, WRITE));
        assert!(credentials(stranger, stranger, &[group]).may(&metadata, SEARCH));
        assert!(!credentials(stranger, stranger, &[]).may(&metadata, SEARCH));
        assert!(credentials(0, 0, &[]).may(&metadata, WRITE));
        std::fs::remove_dir(&dir).unwrap();
    }
}
