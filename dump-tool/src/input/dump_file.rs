//! Reading one dump file: a heapsample dump of any supported format
//! version, or a foreign heap profile ([`super::foreign`]), checked.
//!
//! Owns [`Input`] and every check on a file before symbolization: I/O
//! errors, format errors (via `heapsample_format::decode_versioned`), and
//! values that decode but make no sense. Every failure names the file.

use super::file::{open_regular_file, read_limited, regular_file};
use super::foreign::{self, ForeignKind};
use crate::error::{Error, Result};
use heapsample_format::{DecodeError, Dump, LEGACY_VERSION, VERSION, decode_versioned};
use std::fs::File;
use std::path::{Path, PathBuf};

/// The largest `lg_sample_period` a dump may carry (2^62 bytes).
const MAX_LG_SAMPLE_PERIOD: u32 = 62;

/// One dump as read from a file.
#[derive(Clone, Debug)]
pub struct Input {
    /// The path it was read from, as given.
    pub path: PathBuf,
    pub dump: Dump,
    /// The dump format version it was written in (foreign profiles count
    /// as the current version: their counts get the correction they need).
    pub version: u32,
    /// The foreign profile it was read from (None: a heapsample dump).
    pub foreign: Option<ForeignKind>,
}

/// Read, decode and check `path`.
pub fn load(path: &Path) -> Result<Input> {
    let file = open_regular_file(path).map_err(|why| Error::file(path, why))?;
    load_opened(file, path)
}

/// Read, decode and check the open file `file`, named `name` in errors and
/// reports (the server opens its dumps itself, relative to its
/// directories, and names them by their ids).
pub fn load_opened(file: File, name: &Path) -> Result<Input> {
    let fail = |why: String| Error::file(name, why);
    let file = regular_file(file).map_err(fail)?;
    let modified = file.metadata().and_then(|m| m.modified()).ok();
    let limit = heapsample_format::MAX_BODY_LEN + heapsample_format::HEADER_LEN as u64;
    let bytes = read_limited(file, limit, "a heapsample dump").map_err(fail)?;
    let foreign = foreign::detect(&bytes);
    let (dump, version) = match foreign {
        // Foreign counts get the average-size correction jeprof applies.
        Some(kind) => foreign::parse(&bytes, kind, name, modified).map(|dump| (dump, VERSION)),
        None => decode_versioned(&bytes).map_err(|e| match e {
            DecodeError::Foreign => format!("{e}, nor a jemalloc or gperftools heap profile"),
            e => e.to_string(),
        }),
    }
    .map_err(fail)?;
    drop(bytes);
    validate(&dump).map_err(fail)?;
    let mut dump = dump;
    // Decoding grew the vectors by doubling: give back what is unused.
    dump.stacks.shrink_to_fit();
    dump.live_samples.shrink_to_fit();
    Ok(Input {
        path: name.to_path_buf(),
        dump,
        version,
        foreign,
    })
}

/// The note heapdiff prints once when some of its inputs are format-2
/// dumps, `None` when none is.
pub fn legacy_note(inputs: &[&Input]) -> Option<String> {
    let old: Vec<String> = inputs
        .iter()
        .filter(|input| input.version == LEGACY_VERSION)
        .map(|input| input.path.display().to_string())
        .collect();
    (!old.is_empty()).then(|| {
        format!(
            "{} written in dump format {LEGACY_VERSION}, which has no per-sample weights: its values use the old average-size correction (biased where a stack mixes sizes) and its intervals are approximate",
            old.join(" and ")
        )
    })
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
