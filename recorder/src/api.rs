//! The logic behind the exported C API (`heapsample_dump`,
//! `heapsample_set_active`, `heapsample_reset`), declared for C programs in
//! `shim/include/heapsample.h`.
//!
//! Called by the program's own threads, never inside malloc.

use heapsample_format::Trigger;

use crate::live_table::LIVE;
use crate::stack_table::STACKS;
use crate::{dump_sequence, state, threads, tls, triggers};

/// Write a dump now, to `path` or (None) to the automatic `m` name.
/// Returns 0 or an errno value.
pub fn dump(path: Option<&str>) -> i32 {
    if !state::profiling() {
        return libc::ENOTSUP;
    }
    let _guard = tls::Guard::enter();
    match dump_sequence::write_dump(Trigger::Manual, path) {
        Ok(_) => 0,
        Err(errno) => errno,
    }
}

/// Write a dump now under the automatic `m` name; returns its path (made
/// absolute), or an errno value.
pub fn dump_named() -> Result<String, i32> {
    if !state::profiling() {
        return Err(libc::ENOTSUP);
    }
    let _guard = tls::Guard::enter();
    let (path, _) = dump_sequence::write_dump(Trigger::Manual, None)?;
    Ok(std::path::absolute(&path)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or(path))
}

/// Turn sampling on or off; returns the previous setting (1 or 0), or -1
/// when profiling is off altogether.
pub fn set_active(on: bool) -> i32 {
    if !state::profiling() {
        return -1;
    }
    i32::from(state::set_active(on))
}

/// Forget every sample so far (the exact counters, which describe the whole
/// process, are kept).
pub fn reset() {
    if !state::profiling() {
        return;
    }
    let _guard = tls::Guard::enter();
    LIVE.clear();
    STACKS.zero_counts();
    triggers::reset_estimate();
    state::reset_sample_counts();
    threads::forget_walk_ends();
}
