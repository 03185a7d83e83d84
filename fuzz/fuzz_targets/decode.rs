//! The dump decoder on arbitrary bytes, and heapdiff's loading path on the
//! same bytes as a file. Properties: no panic, and every decoded dump
//! re-encodes into a file that decodes to the same dump.
//!
//! Most mutations of a real dump break its CRC, so the fuzzer also gets the
//! body with a correct header prepended: the first byte of the input picks
//! which (even: the input is the whole file; odd: the rest is a body).
#![no_main]

use heapsample_format::{Dump, HEADER_LEN, MAGIC, VERSION, decode, encode};
use libfuzzer_sys::fuzz_target;
use std::io::Write;

fn with_header(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(body);
    out
}

fn check(file: &[u8]) {
    let Ok(dump) = decode(file) else { return };
    let again: Dump = decode(&encode(&dump)).expect("a decoded dump re-encodes");
    assert_eq!(again, dump, "re-encoding changed the dump");
}

fn load_as_file(file: &[u8]) {
    thread_local! {
        static PATH: std::path::PathBuf = {
            let dir = std::env::var_os("HEAPSAMPLE_FUZZ_SCRATCH")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(std::env::temp_dir);
            dir.join(format!("heapsample-fuzz-{}.prof", std::process::id()))
        };
    }
    PATH.with(|path| {
        let mut f = std::fs::File::create(path).expect("scratch file");
        f.write_all(file).expect("write scratch file");
        drop(f);
        let loaded = heapdiff::input::load(path).map(|input| input.dump);
        assert_eq!(
            loaded.is_ok(),
            decode(file).is_ok_and(|d| d.lg_sample_period <= 62),
            "heapdiff's input::load disagrees with decode"
        );
        if let Ok(dump) = loaded {
            let mut table = heapdiff::symbols::LocationTable::default();
            let stacks = table.intern_dump(&dump);
            let profile = heapdiff::model::Profile::build(
                &dump,
                &stacks,
                &table,
                heapdiff::model::BuildOptions::default(),
            );
            let _ = heapdiff::model::folding::folded(&profile, &table, heapdiff::model::Metric::InuseSpace);
        }
    });
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let file = if mode & 1 == 0 { data.to_vec() } else { with_header(rest) };
    check(&file);
    // The file path is slower (a write per input): every 8th input.
    if mode & 0x0e == 0 {
        load_as_file(&file);
    }
});
