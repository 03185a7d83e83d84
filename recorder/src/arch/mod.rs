//! What differs by processor: the cycle counter, the raw `gettid` and
//! monotonic clock (system calls by their instruction), the one
//! read-modify-write a signal handler cannot split, and how a signal's saved
//! context says where the thread was.
//!
//! Owns nothing but these small functions, one file per architecture with
//! the same names. A leaf: imports nothing of the crate. Everything here may
//! run inside malloc or a signal handler: no allocation, no lock, no system
//! call but the `gettid` or clock reading it is asked for.

#[cfg(target_arch = "aarch64")]
mod aarch64;
#[cfg(target_arch = "x86_64")]
mod x86_64;

#[cfg(target_arch = "aarch64")]
pub use aarch64::*;
#[cfg(target_arch = "x86_64")]
pub use x86_64::*;

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("heapsample runs on x86_64 and aarch64 only");
