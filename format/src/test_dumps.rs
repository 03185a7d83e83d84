//! Dumps and files shared by the unit tests.

use crate::*;

/// A small dump of the current version.
pub(crate) fn sample_dump() -> Dump {
    Dump {
        pid: 42,
        modules: vec![Module {
            path: "/bin/true".into(),
            build_id: vec![1, 2, 3],
            load_bias: 0x1000,
            ranges: vec![(0x1000, 0x2000)],
            first_epoch: 0,
            last_epoch: None,
        }],
        stacks: vec![Stack {
            frames: vec![0x1234, 0x1500],
            live_objects: 1,
            live_bytes: 100,
            lifetimes: vec![LifetimeBucket {
                bucket: 3,
                samples: 2,
                sampled_bytes: 64,
                weights: Weights {
                    objects: 2.0,
                    bytes: 64.0,
                    ..Weights::default()
                },
            }],
            ..Stack::default()
        }],
        process: Process {
            id: 0x1234_5678_9abc_def0_0fed_cba9_8765_4321,
            start_monotonic_ns: 5_000,
            start_unix_ns: 1,
            dump_monotonic_ns: 9_000,
            ..Process::default()
        },
        bytes_per_call: 1,
        live_samples: vec![LiveSample {
            stack: 0,
            thread: 1,
            birth_ns: 3_000,
            size: 100,
            usable: 104,
        }],
        peak: Some(Peak {
            live_usable_bytes: 4096,
            at_ns: 2_000,
            time_margin_bytes: 4096,
        }),
        ..crate::testing::dump()
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
