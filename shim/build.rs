//! Link `libheapsample.so`:
//! - with immediate binding: every symbol the shim calls is resolved when it
//!   is loaded, once, instead of lazily in each forked child that first
//!   reaches a path the parent never took (the fork handlers, the exit dump);
//! - with libgcc's unwinder linked in (`libgcc_eh.a`) instead of needing
//!   `libgcc_s.so.1`: a C program (a shell, `/bin/true`, every command of a
//!   build) would otherwise load, map and relocate libgcc_s only because of
//!   the profiler. Rust's standard library asks the linker for `-lgcc_s`; a
//!   linker script of that name in a directory searched first answers with
//!   `libgcc_eh.a`. Where the program has its own libgcc_s, the unwinder
//!   switches to it (`heapsample_unwind::use_process_libgcc`).

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,now");
    let out_dir = std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    let dir = PathBuf::from(out_dir).join("static-libgcc");
    std::fs::create_dir_all(&dir).expect("creating the linker-script directory");
    std::fs::write(dir.join("libgcc_s.so"), "INPUT ( -lgcc_eh )\n")
        .expect("writing the libgcc_s linker script");
    println!("cargo:rustc-link-search=native={}", dir.display());
}
