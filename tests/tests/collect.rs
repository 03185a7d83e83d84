//! `heapsample collect` and heapdiff's search of collected copies: a dump
//! directory whose program is gone, moved to another folder (as to another
//! machine), still names the program's function with file and line, and
//! `heapdiff modules` says where each module's names came from; the same
//! dumps without the collection do not.

mod attach_common;

use std::path::Path;

use attach_common::heapsample_path;
use heapsample_tests::{
    BuildOptions, Run, TempDir, compile_c, dump_files_in, go_tool_pprof, heapdiff_ok, shim_path,
};

/// Copy the files of `from` (and its `.build-id` tree when `with_collection`)
/// into `to`.
fn copy_dir(from: &Path, to: &Path, with_collection: bool) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            if with_collection {
                copy_dir(&entry.path(), &target, true);
            }
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn collected_dumps_symbolize_after_the_program_is_gone() {
    let work = TempDir::new("collect");
    let built = compile_c("collect_leak.c", &BuildOptions::pie());
    let app = work.path().join("app");
    std::fs::create_dir(&app).unwrap();
    let program = app.join("collect_leak");
    std::fs::copy(&built.path, &program).unwrap();
    let dumps = work.path().join("dumps");
    std::fs::create_dir(&dumps).unwrap();
    let outcome = Run::new(&program)
        .env("LD_PRELOAD", shim_path())
        .env(
            "PROF_CONF",
            format!(
                "lg_prof_sample:0,prof_prefix:{}/heapsample",
                dumps.display()
            ),
        )
        .run();
    assert!(outcome.status.success(), "{}", outcome.context());
    let exit_dump = dump_files_in(&dumps)
        .into_iter()
        .find(|d| d.path.to_string_lossy().ends_with(".f.prof"))
        .expect("an exit dump");
    let name = exit_dump.path.file_name().unwrap().to_owned();

    let collect = Run::new(heapsample_path()).arg("collect").arg(&dumps).run();
    assert!(collect.status.success(), "{}", collect.context());
    assert!(
        collect.stdout.starts_with("collected "),
        "{}",
        collect.context()
    );
    // A second collection copies nothing and replaces nothing.
    let again = Run::new(heapsample_path()).arg("collect").arg(&dumps).run();
    assert!(
        again.stdout.starts_with("collected 0 of "),
        "{}",
        again.context()
    );

    std::fs::remove_dir_all(&app).unwrap();
    let moved = work.path().join("elsewhere");
    copy_dir(&dumps, &moved, true);
    let bare = work.path().join("bare");
    copy_dir(&dumps, &bare, false);

    let moved_dump = moved.join(&name);
    let text = heapdiff_ok(&["-f", "text", moved_dump.to_str().unwrap()]);
    assert!(text.contains("remember_order"), "{text}");
    let pprof = work.path().join("moved.pb.gz");
    heapdiff_ok(&[
        "-f",
        "pprof",
        "-o",
        pprof.to_str().unwrap(),
        moved_dump.to_str().unwrap(),
    ]);
    if let Some(lines) = go_tool_pprof(&["-lines", "-top"], &pprof, work.path()) {
        assert!(
            lines.contains("remember_order") && lines.contains("collect_leak.c:"),
            "file and line: {lines}"
        );
    }
    let modules = heapdiff_ok(&["modules", moved_dump.to_str().unwrap()]);
    let line = modules
        .lines()
        .find(|line| line.starts_with(program.to_str().unwrap()))
        .unwrap_or_else(|| panic!("the program among the modules: {modules}"));
    assert!(
        line.contains("a copy collected beside the dumps") && line.contains("with file and line"),
        "{line}"
    );

    let bare_dump = bare.join(&name);
    let text = heapdiff_ok(&["-f", "text", bare_dump.to_str().unwrap()]);
    assert!(
        !text.contains("remember_order") && text.contains("collect_leak+0x"),
        "without the collection the program's frames have no names: {text}"
    );
    let modules = heapdiff_ok(&["modules", bare_dump.to_str().unwrap()]);
    assert!(
        modules
            .lines()
            .any(|line| line.starts_with(program.to_str().unwrap()) && line.contains("no names: ")),
        "{modules}"
    );
}

#[test]
fn collect_refuses_a_directory_without_dumps() {
    let empty = TempDir::new("collect-empty");
    let outcome = Run::new(heapsample_path())
        .arg("collect")
        .arg(empty.path())
        .run();
    assert_eq!(outcome.status.code(), Some(1), "{}", outcome.context());
    assert!(
        outcome.stderr.contains("no heapsample dump in"),
        "{}",
        outcome.context()
    );
}
