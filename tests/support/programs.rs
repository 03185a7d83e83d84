//! Building the test programs of `tests/programs/` with gcc, g++ and rustc,
//! cached under the target directory by a hash of source, headers, compiler
//! and flags (so a cached build is always current).

use crate::locate::{programs_dir, target_dir};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// Build `tests/programs/<source>` into the shared library `output` with
/// gcc (`-shared -fPIC` and `flags`), panicking if it does not build.
pub fn build_shared_library(source: &str, output: &Path, flags: &[&str]) -> PathBuf {
    let status = Command::new("gcc")
        .args(["-shared", "-fPIC"])
        .args(flags)
        .arg("-o")
        .arg(output)
        .arg(programs_dir().join(source))
        .status()
        .expect("run gcc");
    assert!(status.success(), "gcc {source} -o {}", output.display());
    output.to_path_buf()
}

/// A built test program.
#[derive(Clone, Debug)]
pub struct Program {
    /// The executable.
    pub path: PathBuf,
    /// True if built as a position-independent executable (addresses in
    /// dumps must then be corrected by the module's load bias).
    pub pie: bool,
}

/// How to build a C or C++ program, see [`compile_c`].
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    /// Build a PIE (`-fPIE -pie`) instead of `-no-pie`.
    pub pie: bool,
    /// Extra compiler flags (`-pthread` is always passed).
    pub extra_flags: Vec<String>,
}

impl BuildOptions {
    /// The default: `-no-pie`, so the program's addresses are absolute.
    pub fn no_pie() -> BuildOptions {
        BuildOptions::default()
    }

    /// A PIE build.
    pub fn pie() -> BuildOptions {
        BuildOptions {
            pie: true,
            ..BuildOptions::default()
        }
    }
}

/// Flags every C/C++ test program is built with: debug info, frame pointers,
/// and no optimisation that would move an allocation call out of the
/// function that is its known site (no sibling calls, no identical-code
/// folding).
pub const COMMON_FLAGS: &[&str] = &[
    "-g",
    "-O1",
    "-fno-omit-frame-pointer",
    "-fno-optimize-sibling-calls",
    "-fno-ipa-icf",
    "-pthread",
    "-Wall",
    "-Wno-use-after-free",
    "-Wno-alloc-size-larger-than",
];

static BUILD_LOCK: Mutex<()> = Mutex::new(());

fn content_hash(parts: &[&[u8]]) -> u64 {
    // DefaultHasher::new() uses fixed keys: stable across processes.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for p in parts {
        p.hash(&mut h);
    }
    h.finish()
}

/// The headers in `tests/programs` (name, then contents, in name order): a
/// program that includes one is rebuilt when it changes.
fn program_headers() -> Vec<Vec<u8>> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(programs_dir())
        .map(|dir| dir.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    names.retain(|p| p.extension().is_some_and(|e| e == "h"));
    names.sort();
    names
        .into_iter()
        .flat_map(|p| {
            let contents = std::fs::read(&p).unwrap_or_default();
            [
                p.file_name()
                    .unwrap_or_default()
                    .as_encoded_bytes()
                    .to_vec(),
                contents,
            ]
        })
        .collect()
}

/// Build `source` (a file in `tests/programs/`) with `compiler` and `args`
/// into `<target>/heapsample-test-programs/<stem>-<hash>/<stem>`, unless that
/// file already exists: the hash covers the source, the headers, the
/// compiler and the flags, so a cached build is always current.
fn build_cached(source: &str, compiler: &str, args: &[String]) -> PathBuf {
    let src_path = programs_dir().join(source);
    let src = std::fs::read(&src_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", src_path.display()));
    let stem = Path::new(source)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| source.to_string());
    let joined = args.join("\u{1}");
    let headers = program_headers();
    let mut parts: Vec<&[u8]> = vec![&src, compiler.as_bytes(), joined.as_bytes()];
    parts.extend(headers.iter().map(Vec::as_slice));
    let hash = content_hash(&parts);
    let dir = target_dir()
        .join("heapsample-test-programs")
        .join(format!("{stem}-{hash:016x}"));
    let out = dir.join(&stem);
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    if out.is_file() {
        return out;
    }
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    // Build under a unique name, then rename: concurrent test binaries never
    // see a half-written executable.
    let tmp = dir.join(format!(".{stem}.{}.tmp", std::process::id()));
    let output = Command::new(compiler)
        .args(args)
        .arg("-o")
        .arg(&tmp)
        .arg(&src_path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    if !output.status.success() {
        panic!(
            "building {} failed: {compiler} {}\n{}{}",
            src_path.display(),
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    std::fs::rename(&tmp, &out)
        .unwrap_or_else(|e| panic!("cannot rename to {}: {e}", out.display()));
    out
}

fn c_like(source: &str, compiler: &str, lang_flags: &[&str], options: &BuildOptions) -> Program {
    let mut args: Vec<String> = lang_flags.iter().map(|s| s.to_string()).collect();
    args.extend(COMMON_FLAGS.iter().map(|s| s.to_string()));
    if options.pie {
        args.extend(["-fPIE".to_string(), "-pie".to_string()]);
    } else {
        args.extend(["-fno-pie".to_string(), "-no-pie".to_string()]);
    }
    args.extend(options.extra_flags.iter().cloned());
    Program {
        path: build_cached(source, compiler, &args),
        pie: options.pie,
    }
}

/// Build the C program `tests/programs/<source>` with gcc
/// (`-g -O1 -fno-omit-frame-pointer -no-pie ...`, see [`COMMON_FLAGS`]).
pub fn compile_c(source: &str, options: &BuildOptions) -> Program {
    c_like(source, "gcc", &["-std=gnu11"], options)
}

/// Build the C++ program `tests/programs/<source>` with g++ (C++17).
pub fn compile_cxx(source: &str, options: &BuildOptions) -> Program {
    c_like(source, "g++", &["-std=c++17"], options)
}

/// Build the single-file Rust program `tests/programs/<source>` with `rustc`
/// (no cargo): `-C opt-level=1 -g`. Uses `$RUSTC` if set.
pub fn compile_rust(source: &str) -> Program {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let args: Vec<String> = [
        "--edition",
        "2021",
        "-C",
        "opt-level=1",
        "-C",
        "debuginfo=1",
        "-C",
        "force-frame-pointers=yes",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    Program {
        path: build_cached(source, &rustc, &args),
        pie: true,
    }
}
