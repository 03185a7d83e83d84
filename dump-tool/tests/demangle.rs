//! heapdiff's C++ demangling is identical to `c++filt`, symbol by symbol, on
//! every mangled name of libstdc++'s dynamic symbol table and of a C++ test
//! program (templates, lambdas, constructors, an anonymous namespace).

use object::{Object, ObjectSymbol};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Mangled C++ names of `path` (dynamic symbols, or the symbol table).
fn mangled_names(path: &Path, dynamic: bool) -> Vec<String> {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file = object::File::parse(&*data).expect("parse ELF");
    let symbols: Vec<String> = if dynamic {
        file.dynamic_symbols()
            .filter_map(|s| s.name().ok().map(str::to_string))
            .collect()
    } else {
        file.symbols()
            .filter_map(|s| s.name().ok().map(str::to_string))
            .collect()
    };
    let mut names: Vec<String> = symbols
        .into_iter()
        .filter(|n| n.starts_with("_Z"))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// `c++filt`'s output for each name, in order.
fn cxxfilt(names: &[String]) -> Vec<String> {
    let mut child = Command::new("c++filt")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run c++filt (binutils)");
    let mut input = child.stdin.take().expect("stdin");
    let text = names.join("\n") + "\n";
    let writer = std::thread::spawn(move || input.write_all(text.as_bytes()));
    let output = child.wait_with_output().expect("c++filt output");
    writer.join().expect("writer").expect("write to c++filt");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn check_identical(names: &[String], what: &str) {
    assert!(
        names.len() > 20,
        "{what}: only {} mangled names",
        names.len()
    );
    let expected = cxxfilt(names);
    assert_eq!(expected.len(), names.len(), "c++filt output length");
    let mismatches: Vec<String> = names
        .iter()
        .zip(&expected)
        .filter_map(|(name, filt)| {
            let ours = heapdiff::symbols::names::demangle(name).0;
            (ours != *filt).then(|| format!("{name}\n  c++filt:  {filt}\n  heapdiff: {ours}"))
        })
        .collect();
    assert!(
        mismatches.is_empty(),
        "{what}: {} of {} names differ from c++filt, e.g.\n{}",
        mismatches.len(),
        names.len(),
        mismatches
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    eprintln!("{what}: {} names identical to c++filt", names.len());
}

fn libstdcxx() -> PathBuf {
    let output = Command::new("g++")
        .arg("-print-file-name=libstdc++.so.6")
        .output()
        .expect("run g++");
    let path = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    std::fs::canonicalize(&path).unwrap_or(path)
}

#[test]
fn libstdcxx_dynamic_symbols_match_cxxfilt() {
    let names = mangled_names(&libstdcxx(), true);
    assert!(names.len() > 3000, "{} names", names.len());
    check_identical(&names, "libstdc++ dynamic symbols");
}

#[test]
fn test_program_symbols_match_cxxfilt() {
    let dir = std::env::temp_dir().join(format!("heapdiff-demangle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/programs");
    for program in ["names_cxx.cpp", "cxx.cpp", "hostile_cxx.cpp"] {
        let binary = dir.join(program.trim_end_matches(".cpp"));
        let status = Command::new("g++")
            .args(["-std=c++17", "-g", "-O1", "-pthread", "-o"])
            .arg(&binary)
            .arg(source.join(program))
            .status()
            .expect("run g++");
        assert!(status.success(), "g++ {program}");
        check_identical(&mangled_names(&binary, false), program);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
