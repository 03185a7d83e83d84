//! One golden dump per format version this crate reads, in `golden/`, written
//! once by that version's writer and committed: each still decodes to the
//! dump it holds, and the current version's is byte for byte what
//! `encode` writes today. A layout changed without a new version (a field
//! added to the model, a frozen layout edited) fails here.

use heapsample_format::{
    Dump, FrameKind, LEGACY_VERSION, LifetimeBucket, LiveSample, Module, Namespaces, OwnMemory,
    PREVIOUS_VERSION, Peak, Process, ProcessContext, ProfilerCost, READABLE_VERSIONS, RemovedDump,
    RuntimeFrames, RuntimeSymbol, Stack, ThreadInfo, Totals, Trigger, VERSION, VERSION_3, WalkEnds,
    Weights, decode_versioned, encode, legacy_weights,
};
use std::path::PathBuf;

fn golden(version: u32) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("v{version}.dump"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The parts every golden dump shares: two modules (one unloaded), two
/// threads, a configuration and a command line.
fn example(stacks: Vec<Stack>, totals: Totals) -> Dump {
    Dump {
        writer: "heapsample golden".into(),
        pid: 4242,
        executable: "/usr/bin/example".into(),
        command_line: vec!["example".into(), "--flag".into(), "ü".into()],
        time_unix_ns: 1_700_000_000_123_456_789,
        trigger: Trigger::HighWater,
        seq: 7,
        trigger_seq: 3,
        lg_sample_period: 14,
        config: "lg_prof_sample:14,prof_gdump:true".into(),
        modules: vec![
            Module {
                path: "/usr/bin/example".into(),
                build_id: vec![0xde, 0xad, 0xbe, 0xef],
                load_bias: 0x5555_0000_0000,
                ranges: vec![(0x5555_0000_1000, 0x5555_0000_9000)],
                first_epoch: 0,
                last_epoch: None,
            },
            Module {
                path: "/usr/lib/plugin.so".into(),
                build_id: vec![],
                load_bias: 0x7f00_0000_0000,
                ranges: vec![
                    (0x7f00_0000_1000, 0x7f00_0000_2000),
                    (0x7f00_0000_3000, 0x7f00_0000_4000),
                ],
                first_epoch: 1,
                last_epoch: Some(2),
            },
        ],
        threads: vec![
            ThreadInfo {
                serial: 1,
                tid: 4242,
                name: "example".into(),
            },
            ThreadInfo {
                serial: 2,
                tid: 4250,
                name: String::new(),
            },
        ],
        stacks,
        totals,
        process: Process::default(),
        bytes_per_call: 0,
        live_samples: vec![],
        peak: None,
        context: ProcessContext::default(),
        runtime: RuntimeFrames::default(),
        cost: ProfilerCost::default(),
        removed_dumps: vec![],
    }
}

/// Raw counts of the two stacks: (live objects, live bytes, alloc objects,
/// alloc bytes).
const COUNTS: [(u64, u64, u64, u64); 2] = [(3, 3000, 10, 10_000), (0, 0, 1, 1 << 20)];

fn stack(index: usize, live: Weights, alloc: Weights) -> Stack {
    let (live_objects, live_bytes, alloc_objects, alloc_bytes) = COUNTS[index];
    Stack {
        frames: [
            vec![0x5555_0000_1234, 0x5555_0000_2000, 0x5555_0000_3000],
            vec![0x7f00_0000_1100],
        ][index]
            .clone(),
        thread: index as u32 + 1,
        epoch: index as u32 * 2,
        live_objects,
        live_bytes,
        live_usable_bytes: live_bytes + 24 * live_objects,
        alloc_objects,
        alloc_bytes,
        live,
        alloc,
        lifetimes: vec![],
    }
}

/// The dump in `golden/v3.dump`: weights with fractions, and every
/// optional total present.
fn version_3() -> Dump {
    let weights = |objects: f64, bytes: f64| Weights {
        objects,
        bytes,
        objects_variance: objects * 0.75,
        bytes_variance: bytes * 1.5,
    };
    example(
        vec![
            stack(0, weights(5.5, 5500.25), weights(17.125, 17_125.5)),
            stack(1, Weights::default(), weights(1.0, 1_048_576.0)),
        ],
        Totals {
            allocations: 1_000_003,
            frees: Some(999_990),
            bytes_allocated: 123_456_789,
            live_usable_bytes: Some(65_536),
            samples_taken: 11,
            samples_dropped: 1,
            samples_live: 3,
            threads_seen: 2,
            profiler_bytes: 40_960,
            resets: 1,
            dropped: Weights::default(),
        },
    )
}

/// The dump in `golden/v4.dump`: version 3's, with a process identity and
/// clocks, lifetimes on the first stack, live samples (one of an unknown
/// usable size), the dropped samples' weights and the exact peak.
fn version_4() -> Dump {
    let mut dump = version_3();
    dump.process = Process {
        id: 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
        parent_id: 7,
        start_monotonic_ns: 1_000_000_000,
        start_unix_ns: 1_699_999_990_000_000_000,
        dump_monotonic_ns: 11_000_000_000,
        attach_unix_ns: Some(1_699_999_990_000_000_000),
    };
    dump.bytes_per_call = 1;
    dump.stacks[0].lifetimes = vec![
        LifetimeBucket {
            bucket: 0,
            samples: 4,
            sampled_bytes: 4000,
            weights: Weights {
                objects: 6.5,
                bytes: 6000.25,
                objects_variance: 2.0,
                bytes_variance: 2e6,
            },
        },
        LifetimeBucket {
            bucket: 35,
            samples: 1,
            sampled_bytes: 1000,
            weights: Weights {
                objects: 1.0,
                bytes: 1000.0,
                ..Weights::default()
            },
        },
    ];
    dump.live_samples = vec![
        LiveSample {
            stack: 0,
            thread: 1,
            birth_ns: 5_000,
            size: 1000,
            usable: 1016,
        },
        LiveSample {
            stack: 0,
            thread: 2,
            birth_ns: 5_000,
            size: 1000,
            usable: 0,
        },
        LiveSample {
            stack: 0,
            thread: 1,
            birth_ns: 9_000_000_000,
            size: 1000,
            usable: 1000,
        },
    ];
    dump.totals.dropped = Weights {
        objects: 1.5,
        bytes: 300.0,
        objects_variance: 0.25,
        bytes_variance: 900.0,
    };
    dump.peak = Some(Peak {
        live_usable_bytes: 1 << 30,
        at_ns: 4_000_000_000,
        time_margin_bytes: 1 << 22,
    });
    dump
}

/// The dump in `golden/v5.dump`: version 4's, with where the process ran,
/// runtime names and walk ends, the profiler's cost and a removed dump.
fn version_5() -> Dump {
    let mut dump = version_4();
    dump.trigger = Trigger::Time;
    dump.context = ProcessContext {
        architecture: "aarch64".into(),
        hostname: "host-7".into(),
        namespaces: Namespaces {
            pid: 4_026_532_001,
            mnt: 4_026_532_002,
            user: 4_026_531_837,
            net: 4_026_532_004,
            uts: 4_026_532_005,
            ipc: 4_026_532_006,
            cgroup: 4_026_532_007,
        },
        cgroup: "/kubepods/pod-1/c-2".into(),
        ns_pids: vec![4242, 1],
    };
    dump.runtime = RuntimeFrames {
        symbols: vec![
            RuntimeSymbol {
                start: 0x7f12_0000_0000,
                size: 0x40,
                name: "py::make_record:/srv/app.py".into(),
                kind: FrameKind::Python,
            },
            RuntimeSymbol {
                start: 0x7f12_0000_1000,
                size: 0x200,
                name: "LazyCompile:~handleRequest /srv/leak.js:3".into(),
                kind: FrameKind::JavaScript,
            },
        ],
        sources: vec!["/tmp/perf-4242.map".into()],
        walk_ends: WalkEnds {
            complete: 90,
            depth_limit: 3,
            no_unwind_info: 5,
            unreadable_stack: 2,
        },
    };
    dump.cost = ProfilerCost {
        memory: OwnMemory {
            stack_table: 1 << 20,
            frames: 65_536,
            live_table: 1 << 22,
            lifetimes: 1728,
            other: 40_960,
        },
        dumps_written: 6,
        dump_bytes: 123_456,
        dump_ns: 7_000_000,
        sampling_ns: 55_000_000,
    };
    dump.removed_dumps = vec![RemovedDump {
        file_name: "heapsample.4242.000002.t2.prof".into(),
        seq: 2,
        trigger: Trigger::Time,
        time_unix_ns: 1_699_999_995_000_000_000,
    }];
    dump
}

/// The dump `golden/v2.dump` decodes to: raw counts, weights from the
/// average-size correction, no `resets` (version 2 had none).
fn version_2() -> Dump {
    let period = 1 << 14;
    let corrected = |objects, bytes| legacy_weights(objects, bytes, period);
    let stacks = (0..2)
        .map(|index| {
            let (live_objects, live_bytes, alloc_objects, alloc_bytes) = COUNTS[index];
            stack(
                index,
                corrected(live_objects, live_bytes),
                corrected(alloc_objects, alloc_bytes),
            )
        })
        .collect();
    example(
        stacks,
        Totals {
            allocations: 1_000_003,
            frees: None,
            bytes_allocated: 123_456_789,
            live_usable_bytes: None,
            samples_taken: 11,
            samples_dropped: 1,
            samples_live: 3,
            threads_seen: 2,
            profiler_bytes: 40_960,
            resets: 0,
            dropped: Weights::default(),
        },
    )
}

#[test]
fn the_current_version_is_what_encode_writes() {
    assert_eq!(VERSION, 5, "a new version: add golden/v{VERSION}.dump");
    let bytes = golden(VERSION);
    assert_eq!(decode_versioned(&bytes), Ok((version_5(), VERSION)));
    assert!(
        encode(&version_5()) == bytes,
        "encode no longer writes golden/v{VERSION}.dump: the body layout changed, \
         which is a new format version (see format/src/versions/mod.rs)"
    );
}

#[test]
fn version_4_still_decodes_without_the_process_context() {
    assert_eq!(
        decode_versioned(&golden(PREVIOUS_VERSION)),
        Ok((version_4(), PREVIOUS_VERSION))
    );
}

#[test]
fn version_3_still_decodes_without_the_time_data() {
    assert_eq!(
        decode_versioned(&golden(VERSION_3)),
        Ok((version_3(), VERSION_3))
    );
}

#[test]
fn version_2_still_decodes_with_the_old_correction() {
    assert_eq!(
        decode_versioned(&golden(LEGACY_VERSION)),
        Ok((version_2(), LEGACY_VERSION))
    );
}

#[test]
fn every_readable_version_has_a_golden_dump() {
    assert_eq!(
        READABLE_VERSIONS,
        [LEGACY_VERSION, VERSION_3, PREVIOUS_VERSION, VERSION]
    );
    for &version in READABLE_VERSIONS {
        let bytes = golden(version);
        assert_eq!(bytes[8..12], version.to_le_bytes(), "v{version}.dump");
        let (_, read) = decode_versioned(&bytes).expect("decodes");
        assert_eq!(read, version);
    }
}

/// A dump of the current version cut short or damaged anywhere is an
/// error, never a dump.
#[test]
fn a_damaged_current_dump_is_an_error() {
    let bytes = golden(VERSION);
    for len in 0..bytes.len() {
        assert!(decode_versioned(&bytes[..len]).is_err(), "{len} bytes");
    }
    for at in 0..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x40;
        assert!(decode_versioned(&damaged).is_err(), "byte {at} flipped");
    }
}

/// Writes `golden/v{VERSION}.dump` when asked (once, when a version is
/// added): `HEAPSAMPLE_WRITE_GOLDEN=1 cargo test -p heapsample-format`.
#[test]
fn write_the_current_golden_dump_when_asked() {
    if std::env::var_os("HEAPSAMPLE_WRITE_GOLDEN").is_none() {
        return;
    }
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("v{VERSION}.dump"));
    std::fs::write(path, encode(&version_5())).unwrap();
}
