//! Reading dump files and checking that two dumps can be compared.
//!
//! Owns every check on the input files that happens before symbolization
//! (foreign heap profiles are parsed by [`crate::foreign`]):
//! I/O errors, format errors (via `heapsample_format::decode`), values that
//! decode but make no sense, and base/new compatibility.

use crate::{Error, Result};
use heapsample_format::{Dump, LEGACY_VERSION, VERSION, decode_versioned};
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The largest `lg_sample_period` a dump may carry (2^62 bytes).
const MAX_LG_SAMPLE_PERIOD: u32 = 62;

/// Open `path` for reading only if it is a regular file. The open itself
/// does not block (a FIFO or a device named in a dump must not hang the
/// tool), and only then is the file's type checked.
pub fn open_regular_file(path: &Path) -> std::result::Result<File, String> {
    /// O_NONBLOCK on Linux.
    const OPEN_NONBLOCK: i32 = 0o4000;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(OPEN_NONBLOCK)
        .open(path)
        .map_err(|e| io_reason(&e))?;
    let metadata = file.metadata().map_err(|e| io_reason(&e))?;
    if !metadata.is_file() {
        return Err(if metadata.is_dir() {
            "is a directory, not a file".to_string()
        } else {
            "not a regular file".to_string()
        });
    }
    Ok(file)
}

/// Read and decode `path` (a heapsample dump, or a jemalloc or gperftools
/// heap profile, see [`crate::foreign`]); every failure names the file.
pub fn load_dump(path: &Path) -> Result<Dump> {
    load_dump_versioned(path).map(|(dump, _)| dump)
}

/// [`load_dump`], also returning the format version the file was written in.
pub fn load_dump_versioned(path: &Path) -> Result<(Dump, u32)> {
    let bytes = read_dump_bytes(path).map_err(|why| Error::file(path, why))?;
    let (dump, version) = match crate::foreign::detect(&bytes) {
        // Foreign counts get the average-size correction jeprof applies.
        Some(kind) => crate::foreign::parse(&bytes, kind, path).map(|dump| (dump, VERSION)),
        None => decode_versioned(&bytes).map_err(|e| match e {
            heapsample_format::DecodeError::Foreign => {
                format!("{e}, nor a jemalloc or gperftools heap profile")
            }
            e => e.to_string(),
        }),
    }
    .map_err(|why| Error::file(path, why))?;
    validate(&dump).map_err(|why| Error::file(path, why))?;
    Ok((dump, version))
}

/// The note heapdiff prints once when some of its inputs are format-2
/// dumps, `None` when none is.
pub fn legacy_note(versions: &[(&Path, u32)]) -> Option<String> {
    let old: Vec<String> = versions
        .iter()
        .filter(|(_, version)| *version == LEGACY_VERSION)
        .map(|(path, _)| path.display().to_string())
        .collect();
    (!old.is_empty()).then(|| {
        format!(
            "{} written in dump format {LEGACY_VERSION}, which has no per-sample weights: its values use the old average-size correction (biased where a stack mixes sizes) and its intervals are approximate",
            old.join(" and ")
        )
    })
}

/// The whole file, if it is a regular file no larger than any dump can be.
fn read_dump_bytes(path: &Path) -> std::result::Result<Vec<u8>, String> {
    let mut file = open_regular_file(path)?;
    let limit = heapsample_format::MAX_BODY_LEN + heapsample_format::HEADER_LEN as u64;
    let size = file.metadata().map_err(|e| io_reason(&e))?.len();
    if size > limit {
        return Err(format!("too large to be a heapsample dump ({size} bytes)"));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.by_ref()
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_reason(&e))?;
    Ok(bytes)
}

fn io_reason(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        std::io::ErrorKind::IsADirectory => "is a directory, not a dump".to_string(),
        _ => format!("cannot read: {error}"),
    }
}

/// Checks on values that decode fine but that no shim writes.
fn validate(dump: &Dump) -> std::result::Result<(), String> {
    if dump.lg_sample_period > MAX_LG_SAMPLE_PERIOD {
        return Err(format!(
            "corrupt: sampling period 2^{} is out of range",
            dump.lg_sample_period
        ));
    }
    Ok(())
}

/// What to do about two dumps that may not be comparable.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Compatibility {
    /// Differences worth a warning; the diff is still meaningful.
    pub warnings: Vec<String>,
    /// Set when the comparison would be meaningless.
    pub error: Option<String>,
}

/// Compare the base and new dumps: different programs are an error (unless
/// `allow_mismatch`), a rebuilt program or a different sampling period a
/// warning.
pub fn check_comparable(base: &Dump, new: &Dump, allow_mismatch: bool) -> Compatibility {
    let mut result = Compatibility::default();
    let same_path = base.executable == new.executable;
    let same_build = main_build_id(base) == main_build_id(new);
    if !same_path && !same_build {
        let message = format!(
            "the base profiles {} but the new dump profiles {}",
            base.executable, new.executable
        );
        if allow_mismatch {
            result.warnings.push(message);
        } else {
            result.error = Some(format!(
                "{message}: comparing different programs is meaningless (pass --allow-mismatch to compare anyway)"
            ));
        }
    } else if !same_build {
        result.warnings.push(format!(
            "{} was rebuilt between the dumps (build-ids differ): stacks may not line up",
            new.executable
        ));
    }
    if base.lg_sample_period != new.lg_sample_period {
        result.warnings.push(format!(
            "sampling periods differ (base 2^{}, new 2^{}): both are corrected, but their noise differs",
            base.lg_sample_period, new.lg_sample_period
        ));
    }
    result
}

/// The build-id of the module whose path is the executable, if any.
fn main_build_id(dump: &Dump) -> Option<&[u8]> {
    dump.modules
        .iter()
        .find(|m| m.path == dump.executable)
        .map(|m| m.build_id.as_slice())
        .filter(|id| !id.is_empty())
}
