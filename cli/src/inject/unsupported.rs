//! aarch64: the ptrace half of `inject/` is not ported yet (its register
//! sets, signal frames, system call numbers and call sequence are
//! x86_64's), so every command that must stop a thread of another process
//! refuses in one line, before touching it. These stand-ins keep the
//! arch-neutral rest of `inject/` (reading `/proc`, the ELF files, the
//! refusal reasons) building unchanged.

use std::time::Duration;

use super::Process;
use super::landscape::Landscape;
use super::proc::Mapping;
use crate::Failure;

/// The one line every command that would stop a thread answers with.
pub fn refusal(process: Process) -> Failure {
    Failure::new(format!(
        "attach is not supported on aarch64 yet: process {} ({}) was not touched; \
         profile it from its start with `heapsample run` (or LD_PRELOAD), and dump it \
         with its dump signal (prof_signal) or heapsample_dump()",
        process.0,
        process.name()
    ))
}

/// No call chains are read.
pub struct Walker;

impl Walker {
    pub fn new(_process: Process, _maps: &[Mapping]) -> Walker {
        Walker
    }
}

/// A stopped thread: none can exist on aarch64.
pub enum Stopped {}

impl Stopped {
    pub fn tid(&self) -> i32 {
        match *self {}
    }
    pub fn stack_pointer(&self) -> u64 {
        match *self {}
    }
    pub fn release(self) -> Result<(), Failure> {
        match self {}
    }
    pub fn read(&self, _address: u64, _len: usize) -> Result<Vec<u8>, Failure> {
        match *self {}
    }
    pub fn write(&self, _address: u64, _bytes: &[u8]) -> Result<(), Failure> {
        match *self {}
    }
    pub fn call(
        &mut self,
        _function: u64,
        _arguments: &[u64],
        _stack: u64,
    ) -> Result<u64, Failure> {
        match *self {}
    }
}

/// Never stops a thread.
pub fn stop_one(
    process: Process,
    _landscape: &Landscape,
    _timeout: Duration,
    _refused: &dyn Fn(i32) -> Failure,
) -> Result<Stopped, Failure> {
    Err(refusal(process))
}
