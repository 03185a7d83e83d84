//! pprof output: a gzipped `profile.proto`.
//!
//! The messages are a hand-written subset of pprof's `profile.proto` as
//! `prost` structs (field numbers from the upstream schema), so no protoc
//! and no build script are needed. Sample types are, in this order,
//! `alloc_objects/count, alloc_space/bytes, inuse_objects/count,
//! inuse_space/bytes` (pprof's heap convention), the period type is
//! `space/bytes` with the sampling period, and `default_sample_type` is the
//! chosen metric. Values are the corrected estimates, rounded. With a base,
//! its samples are added with negated values, as `pprof -base` does.
//! A function in code a language runtime generated has its kind before its
//! name in `system_name` (`javascript:handleRequest (leak.js)`, `python:`,
//! `java:`, `interpreter:`, `jit:`); a native function's is its name.

pub mod builder;
pub mod proto;

pub use builder::PprofOptions;
pub use proto::{
    PbFunction, PbLabel, PbLine, PbLocation, PbMapping, PbProfile, PbSample, PbValueType,
};

use crate::model::Metric;
use crate::pipeline::View;
use builder::{Builder, Encoded};
use flate2::Compression;
use flate2::write::GzEncoder;
use prost::Message;
use std::io::Write;

/// The gzipped profile.
pub fn render(view: &View<'_>, options: &PprofOptions) -> Result<Vec<u8>, String> {
    let profile = encoded(view, options);
    gzip(&[&profile.rest.encode_to_vec(), &profile.samples])
        .map_err(|e| format!("compression failed: {e}"))
}

fn gzip(parts: &[&[u8]]) -> std::io::Result<Vec<u8>> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    for part in parts {
        encoder.write_all(part)?;
    }
    encoder.finish()
}

/// The message, decoded back from its encoding (for tests).
pub fn build(view: &View<'_>, options: &PprofOptions) -> PbProfile {
    let profile = encoded(view, options);
    let mut bytes = profile.rest.encode_to_vec();
    bytes.extend_from_slice(&profile.samples);
    PbProfile::decode(bytes.as_slice()).unwrap_or(profile.rest)
}

/// The profile of the view, its samples encoded as they were added.
fn encoded(view: &View<'_>, options: &PprofOptions) -> Encoded {
    let mut builder = Builder::new(view.table, &options.executable);
    let lifetimes =
        view.new.profile.time.lifetimes && view.base.is_none_or(|b| b.profile.time.lifetimes);
    if lifetimes || Metric::TEMPORARY.contains(&view.metric) {
        builder = builder.with_temporary();
    }
    builder.add_profile(&view.new.profile, 1);
    if let Some(base) = &view.base {
        builder.add_profile(&base.profile, -1);
    }
    builder.finish(view, options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::Input;
    use crate::model::merge::tests::two_processes;
    use crate::pipeline::{Loaded, Session, Settings};
    use crate::symbols::LocationTable;
    use heapsample_format::Dump;
    use std::path::PathBuf;

    fn input(name: &str, dump: &Dump) -> Input {
        Input {
            path: PathBuf::from(name),
            dump: dump.clone(),
            version: heapsample_format::VERSION,
            foreign: None,
        }
    }

    /// The profile of the session of `inputs` (one side, merged when
    /// several).
    fn profile_of(inputs: Vec<Input>) -> PbProfile {
        let loaded = Loaded::several("merged".into(), inputs).unwrap();
        let session = Session::open(
            LocationTable::default(),
            loaded,
            None,
            &Settings::default(),
            &mut |_| {},
        )
        .unwrap();
        build(&session.view(), &PprofOptions::default())
    }

    fn totals(profile: &PbProfile) -> Vec<i64> {
        (0..profile.sample_type.len())
            .map(|i| profile.sample.iter().map(|s| s.value[i]).sum())
            .collect()
    }

    #[test]
    fn a_merged_profile_totals_the_sum_of_its_inputs() {
        let dumps = two_processes();
        let parts: Vec<PbProfile> = dumps
            .iter()
            .enumerate()
            .map(|(i, dump)| profile_of(vec![input(&format!("{i}"), dump)]))
            .collect();
        let merged = profile_of(vec![input("0", &dumps[0]), input("1", &dumps[1])]);
        let sum: Vec<i64> = (0..4)
            .map(|i| parts.iter().map(|p| totals(p)[i]).sum())
            .collect();
        assert_eq!(totals(&merged), sum);
        assert!(sum.iter().all(|&total| total > 0), "{sum:?}");
        let samples: usize = parts.iter().map(|p| p.sample.len()).sum();
        assert_eq!(
            merged.sample.len(),
            samples,
            "samples are pooled, not folded"
        );
        // Each process's `main` keeps its own tid label.
        let tid = merged.string_table.iter().position(|s| s == "tid").unwrap() as i64;
        let mut tids: Vec<i64> = merged
            .sample
            .iter()
            .flat_map(|s| s.label.iter().filter(|l| l.key == tid).map(|l| l.num))
            .collect();
        tids.sort();
        tids.dedup();
        assert_eq!(tids, [101, 102, 103], "main, worker, io (main's tid twice)");
    }
}
