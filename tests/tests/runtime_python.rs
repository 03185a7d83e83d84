//! Python frames above native allocations: CPython ≥ 3.12 started with
//! `-X perf` writes its perf map; the walk steps through its trampolines,
//! the exit dump carries the map's names of the sampled ones, and heapdiff
//! shows the script's functions in call order above the native allocation,
//! alike in folded and json. The interpreters are pyenv's 3.12 and 3.13
//! (`pyenv root`, else `~/.pyenv`).

use heapsample_format::FrameKind;
use heapsample_tests::locate::{path_str, programs_dir};
use heapsample_tests::prerequisite::{Missing, skip};
use heapsample_tests::run::Run;
use heapsample_tests::tools::{heapdiff_ok, json_stacks};
use std::path::PathBuf;

/// pyenv's interpreter of `version` (`3.12`: the newest 3.12.x installed).
fn pyenv_python(version: &str) -> Option<PathBuf> {
    let root = std::process::Command::new("pyenv")
        .arg("root")
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()))
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".pyenv")))?;
    let mut found: Vec<PathBuf> = std::fs::read_dir(root.join("versions"))
        .ok()?
        .filter_map(|entry| entry.ok())
        .filter(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.strip_prefix(version)
                .is_some_and(|rest| rest.starts_with('.') && rest[1..].parse::<u32>().is_ok())
        })
        .map(|entry| entry.path().join("bin").join("python3"))
        .filter(|python| python.exists())
        .collect();
    found.sort();
    found.pop()
}

/// The folded stacks (alloc-space) of `dump` holding `needle`, each Python
/// frame's kind suffix (`_[j]`) checked and taken off.
fn folded_with(dump: &str, needle: &str) -> Vec<String> {
    heapdiff_ok(&[dump, "-m", "alloc-space", "-f", "folded"])
        .lines()
        .filter(|line| line.contains(needle))
        .map(|line| {
            let stack = line.rsplit_once(' ').map_or(line, |(stack, _)| stack);
            let frames = stack.split(';').map(|frame| {
                if frame.ends_with(" (rt_leak.py)_[j]") {
                    frame.strip_suffix("_[j]").unwrap_or(frame)
                } else {
                    assert!(!frame.ends_with(" (rt_leak.py)"), "no kind suffix: {frame}");
                    frame
                }
            });
            frames.collect::<Vec<_>>().join(";")
        })
        .collect()
}

fn check(version: &str) {
    let Some(python) = pyenv_python(version) else {
        skip(Missing::Software(&format!(
            "CPython {version} is not installed under pyenv (pyenv install {version})"
        )));
        return;
    };
    let script = programs_dir().join("rt_leak.py");
    let outcome = Run::new(&python)
        .args(["-X", "perf", path_str(&script)])
        .with_shim()
        .run();
    outcome.assert_success();
    let (file, dump) = outcome.final_dump();
    let map = format!("/tmp/perf-{}.map", outcome.pid);
    let _ = std::fs::remove_file(&map);
    assert_eq!(dump.runtime.sources, [map], "{}", outcome.context());
    for function in ["make_record", "handle_request"] {
        assert!(
            dump.runtime
                .symbols
                .iter()
                .any(|symbol| symbol.kind == FrameKind::Python
                    && symbol.name.starts_with(&format!("py::{function}:"))
                    && symbol.name.ends_with("rt_leak.py")),
            "{function} not among the dump's runtime symbols: {:?}",
            dump.runtime.symbols
        );
    }
    let path = path_str(&file.path);
    // The leak's stacks: the module, then handle_request, then make_record,
    // then the interpreter and the native allocation, in that order.
    let stacks = folded_with(path, "make_record (rt_leak.py)");
    assert!(!stacks.is_empty(), "no stack names make_record");
    for stack in &stacks {
        let frames: Vec<&str> = stack.split(';').collect();
        let at = |name: &str| frames.iter().position(|frame| *frame == name);
        let module = at("<module> (rt_leak.py)").expect(stack);
        let handle = at("handle_request (rt_leak.py)").expect(stack);
        let make = at("make_record (rt_leak.py)").expect(stack);
        let native = at("_PyEval_EvalFrameDefault").expect(stack);
        assert!(module < handle && handle < make, "{stack}");
        assert!(
            frames[make + 1..].contains(&"_PyEval_EvalFrameDefault"),
            "{stack}"
        );
        assert!(native < frames.len() && frames.last() != Some(&"make_record (rt_leak.py)"));
        assert_eq!(frames[0], "_start", "the walk reaches the root: {stack}");
        assert!(!stack.contains("0x"), "no bare address: {stack}");
    }
    // json: the same stacks, frame for frame.
    let json: serde_json::Value =
        serde_json::from_str(&heapdiff_ok(&[path, "-m", "alloc-space", "-f", "json"]))
            .expect("heapdiff's json parses");
    let json_stacks: Vec<String> = json_stacks(&json, "alloc-space")
        .into_iter()
        .filter(|stack| stack.contains("make_record (rt_leak.py)"))
        .collect();
    for stack in &stacks {
        assert!(
            json_stacks.contains(stack),
            "json lacks {stack}: {json_stacks:#?}"
        );
    }
}

#[test]
fn python_3_12_frames_are_named_in_call_order() {
    check("3.12");
}

#[test]
fn python_3_13_frames_are_named_in_call_order() {
    check("3.13");
}
