//! `PROF_CONF`, the options contract between the `heapsample` launcher and
//! `libheapsample.so` (the keys, syntax and limits of `MALLOC_CONF.md`):
//! - [`config`]: the option table, the parser and the validated
//!   [`Config`](config::Config) with its defaults;
//! - [`attach`]: the options an attached process cannot honour, refused
//!   by the launcher before it loads the library and by the library before
//!   anything changes.
//!
//! Plain functions over strings: no I/O, no lock, no global state. The
//! library parses its options inside the first hook call (under its
//! guard), so nothing here may call back into the allocator's hooks
//! beyond allocating.

pub mod attach;
pub mod config;
