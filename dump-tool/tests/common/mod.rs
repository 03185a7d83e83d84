//! Helpers shared by heapdiff's integration tests: compile a small C program
//! with gcc, find the return addresses of its calls to malloc with objdump,
//! and build dumps whose stacks point into it.
#![allow(dead_code)]

pub mod history;

use heapsample_format::{Dump, Module, Stack, Totals, Trigger};
use object::{Object, ObjectSection};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The test program: known allocation sites, one of them inlined.
pub const PROGRAM: &str = r#"
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) void *leaf_alloc(size_t n) {
    void *p = malloc(n);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

static inline __attribute__((always_inline)) void *inlined_helper(size_t n) {
    void *p = malloc(n * 2);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

__attribute__((noinline)) void *outer_with_inline(size_t n) {
    void *p = inlined_helper(n);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

__attribute__((noinline)) void *calls_leaf(size_t n) {
    void *p = leaf_alloc(n);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

int main(int argc, char **argv) {
    (void)argv;
    void *a = calls_leaf((size_t)argc * 10);
    void *b = outer_with_inline((size_t)argc);
    memset(a, 0, 1);
    memset(b, 0, 1);
    return 0;
}
"#;

/// A scratch directory unique to this test process and `name`.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("heapdiff-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Compile `PROGRAM` into `dir/name` with gcc -g -O1 and `extra` flags.
pub fn compile(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let source = dir.join(format!("{name}.c"));
    std::fs::write(&source, PROGRAM).expect("write source");
    let binary = dir.join(name);
    let status = Command::new("gcc")
        .args(["-g", "-O1", "-fno-omit-frame-pointer", "-Wl,--build-id"])
        .args(extra)
        .arg("-o")
        .arg(&binary)
        .arg(&source)
        .status()
        .expect("run gcc");
    assert!(status.success(), "gcc failed");
    binary
}

/// Return addresses (file addresses) of every call, by calling function:
/// `{"leaf_alloc": [ret1], "main": [ret_after_calls_leaf, ...]}` with the
/// callee name beside each.
pub fn call_sites(binary: &Path) -> HashMap<String, Vec<(String, u64)>> {
    let output = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "-w"])
        .arg(binary)
        .output()
        .expect("run objdump");
    let text = String::from_utf8_lossy(&output.stdout);
    let mut sites: HashMap<String, Vec<(String, u64)>> = HashMap::new();
    let mut function = String::new();
    let mut pending_call: Option<String> = None;
    for line in text.lines() {
        if let Some(name) = function_header(line) {
            function = name;
            pending_call = None;
            continue;
        }
        let Some(address) = instruction_address(line) else {
            continue;
        };
        if let Some(callee) = pending_call.take() {
            sites
                .entry(function.clone())
                .or_default()
                .push((callee, address));
        }
        if line.contains("\tcall") {
            pending_call = line
                .rsplit('<')
                .next()
                .map(|s| s.trim_end_matches('>').to_string());
        }
    }
    sites
}

fn function_header(line: &str) -> Option<String> {
    let rest = line.split_once(" <")?.1;
    rest.strip_suffix(">:").map(str::to_string)
}

fn instruction_address(line: &str) -> Option<u64> {
    let (address, _) = line.trim_start().split_once(':')?;
    if !line.starts_with(' ') {
        return None;
    }
    u64::from_str_radix(address.trim(), 16).ok()
}

/// The return address in `caller` after its call to a callee whose name
/// starts with `callee`.
pub fn return_address(
    sites: &HashMap<String, Vec<(String, u64)>>,
    caller: &str,
    callee: &str,
) -> u64 {
    sites
        .get(caller)
        .and_then(|calls| calls.iter().find(|(name, _)| name.starts_with(callee)))
        .map(|(_, address)| *address)
        .unwrap_or_else(|| panic!("no call from {caller} to {callee}: {sites:?}"))
}

/// The GNU build-id and the `.text` range (file addresses) of `binary`.
pub fn build_id_and_text(binary: &Path) -> (Vec<u8>, (u64, u64)) {
    let data = std::fs::read(binary).expect("read binary");
    let file = object::File::parse(&*data).expect("parse ELF");
    let build_id = file.build_id().ok().flatten().unwrap_or_default().to_vec();
    let text = file.section_by_name(".text").expect(".text");
    (build_id, (text.address(), text.address() + text.size()))
}

/// A module for `binary` loaded with `load_bias`.
pub fn module(binary: &Path, load_bias: u64) -> Module {
    let (build_id, (start, end)) = build_id_and_text(binary);
    Module {
        path: binary.display().to_string(),
        build_id,
        load_bias,
        ranges: vec![(start + load_bias, end + load_bias)],
        first_epoch: 0,
        last_epoch: None,
    }
}

/// A stack with `objects` live objects of `size` bytes, all allocated.
pub fn stack(frames: Vec<u64>, objects: u64, size: u64) -> Stack {
    Stack {
        frames,
        thread: 1,
        epoch: 0,
        live_objects: objects,
        live_bytes: objects * size,
        live_usable_bytes: objects * size,
        alloc_objects: objects,
        alloc_bytes: objects * size,
        ..Stack::default()
    }
}

/// `stack` with the weights the shim records for its sampled objects
/// (every object of a stack built here has the stack's average size).
pub fn with_weights(stack: Stack, period: u64) -> Stack {
    Stack {
        live: heapsample_format::legacy_weights(stack.live_objects, stack.live_bytes, period),
        alloc: heapsample_format::legacy_weights(stack.alloc_objects, stack.alloc_bytes, period),
        ..stack
    }
}

/// A dump of `executable` with the given modules and stacks, exact totals
/// summed from the stacks.
pub fn dump(
    executable: &str,
    lg_sample_period: u32,
    modules: Vec<Module>,
    stacks: Vec<Stack>,
) -> Dump {
    let totals = Totals {
        allocations: stacks.iter().map(|s| s.alloc_objects).sum(),
        frees: Some(
            stacks
                .iter()
                .map(|s| s.alloc_objects - s.live_objects)
                .sum(),
        ),
        bytes_allocated: stacks.iter().map(|s| s.alloc_bytes).sum(),
        live_usable_bytes: Some(stacks.iter().map(|s| s.live_usable_bytes).sum()),
        samples_taken: stacks.iter().map(|s| s.alloc_objects).sum(),
        samples_dropped: 0,
        samples_live: stacks.iter().map(|s| s.live_objects).sum(),
        threads_seen: 1,
        profiler_bytes: 0,
        resets: 0,
        ..Totals::default()
    };
    let period = 1u64 << lg_sample_period;
    let stacks = stacks
        .into_iter()
        .map(|stack| with_weights(stack, period))
        .collect();
    Dump {
        writer: "heapdiff-test".into(),
        pid: 4242,
        executable: executable.into(),
        command_line: vec![executable.into()],
        time_unix_ns: 1_700_000_000_000_000_000,
        trigger: Trigger::Final,
        lg_sample_period,
        modules,
        stacks,
        totals,
        bytes_per_call: heapsample_format::BYTES_PER_CALL as u32,
        ..heapsample_format::testing::dump()
    }
}

/// The test program compiled non-PIE plus its call sites.
pub struct Fixture {
    pub dir: PathBuf,
    pub binary: PathBuf,
    pub sites: HashMap<String, Vec<(String, u64)>>,
}

impl Fixture {
    pub fn new(name: &str, flags: &[&str]) -> Fixture {
        let dir = scratch_dir(name);
        let binary = compile(&dir, "prog", flags);
        let sites = call_sites(&binary);
        Fixture { dir, binary, sites }
    }

    pub fn ret(&self, caller: &str, callee: &str) -> u64 {
        return_address(&self.sites, caller, callee)
    }

    /// The stack `main → calls_leaf → leaf_alloc → malloc` (file addresses + bias).
    pub fn leaf_stack(&self, bias: u64) -> Vec<u64> {
        vec![
            self.ret("leaf_alloc", "malloc") + bias,
            self.ret("calls_leaf", "leaf_alloc") + bias,
            self.ret("main", "calls_leaf") + bias,
        ]
    }

    /// The stack `main → outer_with_inline → [inlined_helper] → malloc`.
    pub fn inline_stack(&self, bias: u64) -> Vec<u64> {
        vec![
            self.ret("outer_with_inline", "malloc") + bias,
            self.ret("main", "outer_with_inline") + bias,
        ]
    }
}

/// A small seeded generator (64-bit LCG, top bits) for bounded property tests.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 11
    }

    pub fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }
}

/// Decode a gzipped pprof file written by heapdiff.
pub fn read_pprof(path: &Path) -> heapdiff::render::pprof::PbProfile {
    use prost::Message;
    use std::io::Read;
    let compressed = std::fs::read(path).expect("read pprof");
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(&compressed[..])
        .read_to_end(&mut bytes)
        .expect("gunzip");
    heapdiff::render::pprof::PbProfile::decode(&bytes[..]).expect("decode profile.proto")
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if std::env::var_os("HEAPDIFF_TEST_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
