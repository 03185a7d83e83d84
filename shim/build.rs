//! Link `libheapsample.so` with immediate binding: every symbol the shim
//! calls is resolved when it is loaded, once, instead of lazily in each
//! forked child that first reaches a path the parent never took (the fork
//! handlers, the exit dump).

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,now");
}
