//! Link `libheapsample.so`:
//! - with immediate binding: every symbol the shim calls is resolved when it
//!   is loaded, once, instead of lazily in each forked child that first
//!   reaches a path the parent never took (the fork handlers, the exit dump);
//! - with libgcc's unwinder linked in (`libgcc_eh.a`) instead of needing
//!   `libgcc_s.so.1`: a C program (a shell, `/bin/true`, every command of a
//!   build) would otherwise load, map and relocate libgcc_s only because of
//!   the profiler. Rust's standard library asks the linker for `-lgcc_s`; a
//!   linker script of that name in a directory searched first answers with
//!   a copy of `libgcc_eh.a` whose frame-registration functions
//!   (`__register_frame*`, `__deregister_frame*`) are made local to their
//!   object file: the shim exports its own (`frames.rs`, which interpose the
//!   process's libgcc_s), and libgcc_eh's hidden copies would otherwise
//!   collide with them and make them hidden too. Where the program has its
//!   own libgcc_s, the unwinder switches to it
//!   (`heapsample_unwind::use_process_libgcc`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// libgcc's frame-registration functions, which `frames.rs` exports.
const REGISTRATION: [&str; 9] = [
    "__register_frame",
    "__register_frame_info",
    "__register_frame_info_bases",
    "__register_frame_table",
    "__register_frame_info_table",
    "__register_frame_info_table_bases",
    "__deregister_frame",
    "__deregister_frame_info",
    "__deregister_frame_info_bases",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,now");
    let out_dir = std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    let dir = PathBuf::from(out_dir).join("static-libgcc");
    std::fs::create_dir_all(&dir).expect("creating the linker-script directory");
    let archive = dir.join("libgcc_eh_local.a");
    localize_registration(&archive);
    std::fs::write(
        dir.join("libgcc_s.so"),
        format!("INPUT ( {} )\n", archive.display()),
    )
    .expect("writing the libgcc_s linker script");
    println!("cargo:rustc-link-search=native={}", dir.display());
}

/// Writes to `archive` the target's `libgcc_eh.a` with [`REGISTRATION`]
/// local, with the target's C compiler and objcopy (`gcc`/`objcopy`, or
/// the cross tools named after the target: `aarch64-linux-gnu-gcc`).
fn localize_registration(archive: &Path) {
    let target = std::env::var("TARGET").expect("cargo sets TARGET");
    let host = std::env::var("HOST").expect("cargo sets HOST");
    let prefix = if target == host {
        String::new()
    } else {
        let arch = target.split('-').next().unwrap_or_default();
        format!("{arch}-linux-gnu-")
    };
    let compiler = format!("{prefix}gcc");
    let found = Command::new(&compiler)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .unwrap_or_else(|error| panic!("running {compiler}: {error}"));
    let original = String::from_utf8_lossy(&found.stdout).trim().to_string();
    assert!(
        found.status.success() && Path::new(&original).is_absolute(),
        "{compiler} does not know where libgcc_eh.a is: {original}"
    );
    println!("cargo:rerun-if-changed={original}");
    let objcopy = format!("{prefix}objcopy");
    let mut command = Command::new(&objcopy);
    for symbol in REGISTRATION {
        command.arg(format!("--localize-symbol={symbol}"));
    }
    let status = command
        .arg(&original)
        .arg(archive)
        .status()
        .unwrap_or_else(|error| panic!("running {objcopy}: {error}"));
    assert!(status.success(), "{objcopy} failed on {original}");
}
