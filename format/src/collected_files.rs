//! Where a module's files are kept when a dump's modules are collected
//! beside it: `.build-id/xx/yyyy…SUFFIX`, the layout debuggers use (the
//! module's own file without a suffix, its separate debug file with
//! `.debug`). The launcher's `collect` writes this layout and heapdiff reads
//! it; this is the one place that spells it.
//!
//! A leaf: imports nothing from the crate, does no I/O.

use std::path::PathBuf;

/// The path of a module's collected file relative to the collection's
/// directory; None for a module without a build-id.
pub fn build_id_path(build_id: &[u8], suffix: &str) -> Option<PathBuf> {
    let (first, rest) = build_id.split_first()?;
    let rest: String = rest.iter().map(|b| format!("{b:02x}")).collect();
    Some(PathBuf::from(format!(
        ".build-id/{first:02x}/{rest}{suffix}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_byte_names_the_directory() {
        assert_eq!(
            build_id_path(&[0xab, 0xcd, 0xef], ".debug"),
            Some(PathBuf::from(".build-id/ab/cdef.debug"))
        );
        assert_eq!(build_id_path(&[], ""), None);
    }
}
