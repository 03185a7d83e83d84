//! Whether dumps can be put side by side: a base and a new dump compared,
//! or many dumps merged.
//!
//! Owns the judgement only (errors and warnings as text); never reads
//! files, never stops anything itself.

use heapsample_format::Dump;

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

/// Warnings about merging `dumps` (of several processes or hosts): of
/// different programs, or with different sampling periods.
pub fn merge_warnings(dumps: &[&Dump]) -> Vec<String> {
    let mut warnings = Vec::new();
    let Some(first) = dumps.first() else {
        return warnings;
    };
    if let Some(other) = dumps.iter().find(|d| d.executable != first.executable) {
        warnings.push(format!(
            "merging dumps of different programs ({} and {}): functions of the same name add up",
            first.executable, other.executable
        ));
    }
    if dumps
        .iter()
        .any(|d| d.lg_sample_period != first.lg_sample_period)
    {
        warnings.push(
            "sampling periods differ between the dumps; each is corrected with its own".to_string(),
        );
    }
    warnings
}
