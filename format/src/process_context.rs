//! Where a process ran: its architecture, host, namespaces, cgroup and
//! its pid as each PID namespace it belongs to sees it, so that dumps of
//! many containers of one host are told apart and read on another host.
//!
//! Plain data: no I/O (the recorder reads `/proc/self` for it).

use crate::serde_strings::owned_from_borrowed;
use serde::{Deserialize, Serialize};

/// The inode numbers of the process's namespaces (`/proc/PID/ns/*`), 0
/// where unknown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Namespaces {
    /// PID namespace.
    pub pid: u64,
    /// Mount namespace.
    pub mnt: u64,
    /// User namespace.
    pub user: u64,
    /// Network namespace.
    pub net: u64,
    /// UTS namespace (the hostname's).
    pub uts: u64,
    /// IPC namespace.
    pub ipc: u64,
    /// Cgroup namespace.
    pub cgroup: u64,
}

/// The machine and container a dump's process ran in.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessContext {
    /// The instruction set the stacks' addresses are of, as Rust names it
    /// (`x86_64`, `aarch64`); empty before format 5 (all x86_64).
    #[serde(deserialize_with = "owned_from_borrowed")]
    pub architecture: String,
    /// The host name as the process saw it (`uname`).
    #[serde(deserialize_with = "owned_from_borrowed")]
    pub hostname: String,
    /// The process's namespaces.
    pub namespaces: Namespaces,
    /// Its cgroup (v2: the path of `/proc/self/cgroup`'s `0::` line).
    #[serde(deserialize_with = "owned_from_borrowed")]
    pub cgroup: String,
    /// Its pid in each PID namespace it is in, outermost first (`NSpid` of
    /// `/proc/self/status`); one entry outside any container.
    pub ns_pids: Vec<u32>,
}
