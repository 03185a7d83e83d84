//! Dumps and files shared by the unit tests.

use crate::*;

/// A small dump of the current version.
pub(crate) fn sample_dump() -> Dump {
    Dump {
        writer: "test".into(),
        pid: 42,
        executable: "/bin/true".into(),
        command_line: vec!["true".into()],
        time_unix_ns: 1,
        trigger: Trigger::Final,
        seq: 0,
        trigger_seq: 0,
        lg_sample_period: 19,
        config: String::new(),
        modules: vec![Module {
            path: "/bin/true".into(),
            build_id: vec![1, 2, 3],
            load_bias: 0x1000,
            ranges: vec![(0x1000, 0x2000)],
            first_epoch: 0,
            last_epoch: None,
        }],
        threads: vec![],
        stacks: vec![Stack {
            frames: vec![0x1234, 0x1500],
            live_objects: 1,
            live_bytes: 100,
            ..Stack::default()
        }],
        totals: Totals::default(),
    }
}

/// A file of `version` with a valid header and checksum around any body.
pub(crate) fn file_with_body(version: u32, body: &[u8]) -> Vec<u8> {
    let mut file = Vec::new();
    file.extend_from_slice(&MAGIC);
    file.extend_from_slice(&version.to_le_bytes());
    file.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    file.extend_from_slice(&(body.len() as u64).to_le_bytes());
    file.extend_from_slice(body);
    file
}
