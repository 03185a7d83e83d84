//! Symbolization speed: 10,000 distinct addresses spread over the text of a
//! large binary with full DWARF (the debug build of heapdiff itself).
//! Bounded generously because this test itself is built without
//! optimisation; the release figure is in the README. Set
//! `HEAPDIFF_SPEED_DUMP=PATH` to also write the dump for timing the CLI.

mod common;

use heapdiff::symbols::{LocationTable, SymbolizeOptions};
use heapsample_format::{Module, Stack, encode};
use object::{Object, ObjectSection};
use std::path::Path;

const ADDRESSES: u64 = 10_000;
const LOAD_BIAS: u64 = 0x5555_0000_0000;

#[test]
fn ten_thousand_addresses_in_a_large_binary() {
    let binary = Path::new(env!("CARGO_BIN_EXE_heapdiff"));
    let data = std::fs::read(binary).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let text = file.section_by_name(".text").unwrap();
    let (start, size) = (text.address(), text.size());
    let build_id = file.build_id().ok().flatten().unwrap_or_default().to_vec();
    let stride = size / ADDRESSES;
    let frames: Vec<u64> = (0..ADDRESSES)
        .map(|i| LOAD_BIAS + start + 1 + i * stride)
        .collect();
    let stacks = frames
        .chunks(10)
        .map(|chunk| Stack {
            frames: chunk.to_vec(),
            live_objects: 1,
            live_bytes: 64,
            alloc_objects: 1,
            alloc_bytes: 64,
            live: heapsample_format::legacy_weights(1, 64, 1),
            alloc: heapsample_format::legacy_weights(1, 64, 1),
            ..Stack::default()
        })
        .collect();
    let module = Module {
        path: binary.display().to_string(),
        build_id,
        load_bias: LOAD_BIAS,
        ranges: vec![(LOAD_BIAS + start, LOAD_BIAS + start + size)],
        first_epoch: 0,
        last_epoch: None,
    };
    let dump = common::dump(&module.path.clone(), 0, vec![module], stacks);
    if let Some(path) = std::env::var_os("HEAPDIFF_SPEED_DUMP") {
        std::fs::write(path, encode(&dump)).unwrap();
    }
    let mut table = LocationTable::default();
    table.intern_dump(&dump);
    let stats = table.symbolize(&SymbolizeOptions::default(), &mut |w| panic!("{w}"));
    eprintln!(
        "symbolized {} addresses of a {} MB binary in {:?}",
        stats.addresses,
        data.len() >> 20,
        stats.elapsed
    );
    assert_eq!(stats.addresses, ADDRESSES as usize);
    let named = table
        .locations
        .iter()
        .filter(|l| l.lines.first().is_some_and(|line| line.line > 0))
        .count();
    assert!(
        named > 7_500,
        "only {named} addresses resolved to a source line"
    );
    assert!(stats.elapsed.as_secs() < 120, "took {:?}", stats.elapsed);
}
