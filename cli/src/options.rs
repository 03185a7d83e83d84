//! The profiling options `run` and `attach` share, composed into a
//! `PROF_CONF` string (the syntax and keys of MALLOC_CONF.md).

use std::path::{Path, PathBuf};

use clap::Args;

use crate::Failure;

/// Options of the profiler.
#[derive(Args, Clone, Debug, Default)]
pub struct ProfileOptions {
    /// Directory for the dumps (created if missing; default: the current
    /// directory).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// log2 of the mean sampling period in bytes (`lg_prof_sample`; the
    /// default 19 is 512 KiB, 0 samples every allocation).
    #[arg(long = "lg-sample", value_name = "N", value_parser = clap::value_parser!(u32).range(0..=i64::from(heapsample_options::config::MAX_LG_PROF_SAMPLE)))]
    pub lg_sample: Option<u32>,
    /// More options in PROF_CONF syntax (`key:value,...`, see MALLOC_CONF.md);
    /// may be repeated.
    #[arg(long = "conf", value_name = "KEY:VALUE,...")]
    pub conf: Vec<String>,
}

/// The file name prefix of dumps inside the output directory.
pub const DUMP_BASE: &str = "heapsample";

impl ProfileOptions {
    /// The output directory, absolute (the current directory by default).
    pub fn output_dir(&self) -> Result<PathBuf, Failure> {
        let dir = self.output.clone().unwrap_or_else(|| PathBuf::from("."));
        Ok(std::path::absolute(dir)?)
    }

    /// No option given (no `-o`, no `--lg-sample`, no `--conf`).
    pub fn is_empty(&self) -> bool {
        self.output.is_none() && self.lg_sample.is_none() && self.conf.is_empty()
    }

    /// The `PROF_CONF` items these options stand for, in order (a later
    /// item overrides an earlier one of the same key), ending with the
    /// prefix for the output directory.
    pub fn items(&self) -> Result<Vec<String>, Failure> {
        let mut items = Vec::new();
        if let Some(lg) = self.lg_sample {
            items.push(format!("lg_prof_sample:{lg}"));
        }
        items.extend(
            self.conf
                .iter()
                .flat_map(|conf| conf.split(','))
                .filter(|item| !item.trim().is_empty())
                .map(str::to_string),
        );
        items.push(format!("prof_prefix:{}", prefix_in(&self.output_dir()?)?));
        Ok(items)
    }
}

/// `prof_prefix` for dumps in `dir`.
pub fn prefix_in(dir: &Path) -> Result<String, Failure> {
    let dir = dir
        .to_str()
        .ok_or_else(|| Failure::new(format!("{} is not UTF-8", dir.display())))?;
    if dir.contains(',') {
        return Err(Failure::new(format!(
            "the output directory {dir:?} contains a comma, which PROF_CONF cannot carry"
        )));
    }
    Ok(format!("{}/{DUMP_BASE}", dir.trim_end_matches('/')))
}

/// Create `dir` unless it is a directory already.
pub fn ensure_directory(dir: &Path) -> Result<(), Failure> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::new(format!("cannot create {}: {e}", dir.display())))
}

/// `items` joined into one `PROF_CONF` value.
pub fn join(items: &[String]) -> String {
    items.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_become_prof_conf_items_in_order() {
        let options = ProfileOptions {
            output: Some(PathBuf::from("/tmp/out/")),
            lg_sample: Some(14),
            conf: vec!["prof_leak:true,prof_accum:false".into(), "".into()],
        };
        assert_eq!(
            options.items().ok().unwrap(),
            [
                "lg_prof_sample:14",
                "prof_leak:true",
                "prof_accum:false",
                "prof_prefix:/tmp/out/heapsample"
            ]
        );
        assert!(prefix_in(Path::new("/tmp/a,b")).is_err());
    }
}
