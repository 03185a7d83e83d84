//! Dump files by name: `<prefix>.<pid>[_<generation>].<seq>.<trigger><n>.prof`
//! parsed, listed and decoded.

use crate::temp_dir::list_dir;
use heapsample_format::Dump;
use std::path::{Path, PathBuf};

/// A dump file name parsed: `<prefix>.<pid>[_<generation>].<seq>.<trigger><n>.prof`
/// (e.g. `heapsample.1234.0.f.prof`; `trigger` is `f`, or `i3`, `m0`...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpFile {
    /// Full path.
    pub path: PathBuf,
    /// File name.
    pub name: String,
    /// The prefix (everything before `.<pid>`).
    pub prefix: String,
    /// The pid in the name.
    pub pid: u32,
    /// The generation after the pid (`<pid>_<generation>`), present when an
    /// earlier process with the same pid had taken the plain name.
    pub generation: Option<u64>,
    /// The global sequence number in the name.
    pub seq: u64,
    /// The trigger letter (`f`, `i`, `m`, `u`, `s`, `o`, `t`).
    pub trigger: String,
    /// The per-trigger sequence number, absent for `f`.
    pub trigger_seq: Option<u64>,
}

impl DumpFile {
    /// Parse a file name; `None` if it does not follow the pattern.
    pub fn parse(path: &Path) -> Option<DumpFile> {
        let name = path.file_name()?.to_str()?.to_string();
        let stem = name.strip_suffix(".prof")?;
        let parts: Vec<&str> = stem.rsplitn(4, '.').collect();
        if parts.len() != 4 {
            return None;
        }
        let (kind, seq, tag, prefix) = (parts[0], parts[1], parts[2], parts[3]);
        let (pid, generation) = match tag.split_once('_') {
            Some((pid, generation)) => (pid, Some(generation.parse().ok()?)),
            None => (tag, None),
        };
        let letter = kind.chars().next()?;
        if !"fimusot".contains(letter) {
            return None;
        }
        let rest = &kind[1..];
        let trigger_seq = if rest.is_empty() {
            None
        } else {
            Some(rest.parse().ok()?)
        };
        Some(DumpFile {
            path: path.to_path_buf(),
            name: name.clone(),
            prefix: prefix.to_string(),
            pid: pid.parse().ok()?,
            generation,
            seq: seq.parse().ok()?,
            trigger: letter.to_string(),
            trigger_seq,
        })
    }

    /// Read and decode the file; panics with the name and error otherwise.
    pub fn decode(&self) -> Dump {
        let bytes = std::fs::read(&self.path)
            .unwrap_or_else(|e| panic!("cannot read dump {}: {e}", self.path.display()));
        heapsample_format::decode(&bytes).unwrap_or_else(|e| {
            panic!(
                "dump {} ({} bytes) does not decode: {e}",
                self.path.display(),
                bytes.len()
            )
        })
    }
}

/// The dump files (see [`DumpFile::parse`]) in `dir`, sorted by name.
pub fn dump_files_in(dir: &Path) -> Vec<DumpFile> {
    list_dir(dir)
        .into_iter()
        .filter_map(|n| DumpFile::parse(&dir.join(n)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dump_names() {
        let f = DumpFile::parse(Path::new("/x/heapsample.123.4.f.prof")).unwrap();
        assert_eq!(
            (
                f.prefix.as_str(),
                f.pid,
                f.seq,
                f.trigger.as_str(),
                f.trigger_seq
            ),
            ("heapsample", 123, 4, "f", None)
        );
        let f = DumpFile::parse(Path::new("/x/my.pre.fix.9.10.i3.prof")).unwrap();
        assert_eq!(
            (f.prefix.as_str(), f.seq, f.trigger_seq),
            ("my.pre.fix", 10, Some(3))
        );
        assert!(DumpFile::parse(Path::new("/x/heapsample.1.2.f.prof.tmp")).is_none());
        assert!(DumpFile::parse(Path::new("/x/heapsample.x.2.f.prof")).is_none());
    }
}
