//! Symbolization speed: 10,000 distinct addresses spread over the text of a
//! generated C program of 4,000 functions compiled with full DWARF
//! (`gcc -g`). Bounded generously because this test may be built without
//! optimisation; the release figure is in the README. Set
//! `HEAPDIFF_SPEED_DUMP=PATH` to also write the dump (and keep the binary)
//! for timing the CLI.

mod common;

use heapdiff::symbols::{LocationTable, SymbolizeOptions};
use heapsample_format::{Module, Stack, encode};
use object::{Object, ObjectSection};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

const ADDRESSES: u64 = 10_000;
const FUNCTIONS: usize = 4_000;
const LOAD_BIAS: u64 = 0x5555_0000_0000;

/// A program of `FUNCTIONS` small functions, each calling the next, so that
/// every address of its text belongs to a function with file and line.
fn large_program(dir: &Path) -> PathBuf {
    let mut source = String::from("#include <stdlib.h>\nvolatile long sink;\n");
    for i in (0..FUNCTIONS).rev() {
        let next = if i + 1 < FUNCTIONS {
            format!("f{}(n + {i})", i + 1)
        } else {
            "malloc(n)".to_string()
        };
        let _ = writeln!(
            source,
            "__attribute__((noinline)) void *f{i}(long n) {{\n  sink += n * {i};\n  if (sink == {i}) sink -= n;\n  void *p = {next};\n  sink ^= (long)p;\n  return p;\n}}"
        );
    }
    source.push_str("int main(void) { return f0(1) == 0; }\n");
    let (c_file, binary) = (dir.join("large.c"), dir.join("large"));
    std::fs::write(&c_file, source).unwrap();
    let status = Command::new("gcc")
        .args(["-g", "-O0", "-Wl,--build-id", "-o"])
        .arg(&binary)
        .arg(&c_file)
        .status()
        .expect("run gcc");
    assert!(status.success(), "gcc failed");
    binary
}

#[test]
fn ten_thousand_addresses_in_a_large_binary() {
    let dir = common::scratch_dir("speed");
    let binary = large_program(&dir);
    let data = std::fs::read(&binary).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let text = file.section_by_name(".text").unwrap();
    let (start, size) = (text.address(), text.size());
    let build_id = file.build_id().ok().flatten().unwrap_or_default().to_vec();
    let stride = size / ADDRESSES;
    assert!(stride > 0, "a text of {size} bytes is too small");
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
    // The dump for timing the CLI keeps its binary (the scratch directory).
    let keep = std::env::var_os("HEAPDIFF_SPEED_DUMP");
    if let Some(path) = &keep {
        std::fs::write(path, encode(&dump)).unwrap();
    }
    let mut table = LocationTable::default();
    table.intern_dump(&dump);
    let stats = table.symbolize(&SymbolizeOptions::default(), &mut |w| panic!("{w}"));
    eprintln!(
        "symbolized {} addresses of a {} KB binary in {:?}",
        stats.addresses,
        data.len() >> 10,
        stats.elapsed
    );
    assert_eq!(stats.addresses, ADDRESSES as usize);
    let named = table
        .locations
        .iter()
        .filter(|l| l.lines.first().is_some_and(|line| line.line > 0))
        .count();
    assert!(
        named > 9_000,
        "only {named} addresses resolved to a source line"
    );
    assert!(stats.elapsed.as_secs() < 120, "took {:?}", stats.elapsed);
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
