//! Dumps for tests (the `testing` feature): one constructor of a valid,
//! empty dump that fixtures complete with struct-update syntax
//! (`Dump { stacks, ..testing::dump() }`), so a field added to the model
//! is given its test value here once, not in every fixture.

use crate::model::{Dump, Process, Totals, Trigger};

/// A valid dump of the current version with nothing in it: pid 1 of
/// `/bin/true`, an exit dump at the default period, no modules, threads,
/// stacks or samples, zero totals and clocks.
pub fn dump() -> Dump {
    Dump {
        writer: "test".into(),
        pid: 1,
        executable: "/bin/true".into(),
        command_line: vec!["true".into()],
        time_unix_ns: 1,
        trigger: Trigger::Final,
        seq: 0,
        trigger_seq: 0,
        lg_sample_period: 19,
        config: String::new(),
        modules: Vec::new(),
        threads: Vec::new(),
        stacks: Vec::new(),
        totals: Totals::default(),
        process: Process::default(),
        bytes_per_call: 0,
        live_samples: Vec::new(),
        peak: None,
        context: Default::default(),
        runtime: Default::default(),
        cost: Default::default(),
        removed_dumps: Vec::new(),
    }
}
