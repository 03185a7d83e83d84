//! The allocator's own functions: the frames dropped at the leaf of every
//! stack unless `--keep-allocator-frames` (like pprof's `drop_frames`).
//!
//! Owns the lists of names and prefixes; plain functions over strings.

/// Exact names of allocator entry points (C, glibc, jemalloc).
const ALLOCATOR_NAMES: &[&str] = &[
    "malloc",
    "calloc",
    "realloc",
    "reallocarray",
    "free",
    "cfree",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "mallocx",
    "rallocx",
    "xallocx",
    "__libc_malloc",
    "__libc_calloc",
    "__libc_realloc",
    "__libc_memalign",
    "__libc_valloc",
    "__libc_pvalloc",
    "__posix_memalign",
    "_int_malloc",
];

/// Prefixes of allocator functions and the allocation plumbing of Rust's and
/// C++'s standard libraries (like pprof's `drop_frames` for heap profiles).
const ALLOCATOR_PREFIXES: &[&str] = &[
    "operator new",
    "operator delete",
    "__rust_alloc",
    "__rust_realloc",
    "__rust_alloc_zeroed",
    "__rdl_",
    "__rg_",
    "alloc::alloc::",
    "alloc::raw_vec::",
    "<alloc::alloc::Global as core::alloc::",
    "<alloc::alloc::Global>::",
    "<alloc::raw_vec::",
    "alloc::boxed::box_new_uninit",
    "<std::alloc::System as core::alloc::",
    "std::alloc::",
    "std::sys::alloc::",
    "std::sys::pal::unix::alloc::",
    "__gnu_cxx::new_allocator<",
    "__gnu_cxx::__new_allocator<",
    "std::__new_allocator<",
    "std::allocator<",
    "std::allocator_traits<",
];

/// True for the allocator's own functions, dropped at the leaf by default.
pub fn is_allocator_function(name: &str) -> bool {
    ALLOCATOR_NAMES.contains(&name) || ALLOCATOR_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Make a function name safe as one folded-stack frame: `;` separates frames
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocator_functions() {
        for name in [
            "malloc",
            "calloc",
            "operator new(unsigned long)",
            "operator new[](unsigned long)",
            "__rust_alloc",
            "__rdl_alloc",
            "alloc::alloc::alloc",
            "alloc::raw_vec::RawVecInner<A>::try_allocate_in",
            "<alloc::alloc::Global as core::alloc::Allocator>::allocate",
            "<alloc::alloc::Global>::alloc_impl_runtime",
            "<alloc::raw_vec::RawVecInner>::try_allocate_in",
            "std::sys::alloc::unix::<impl core::alloc::global::GlobalAlloc for std::alloc::System>::alloc",
        ] {
            assert!(is_allocator_function(name), "{name}");
        }
        for name in [
            "main",
            "malloc_wrapper",
            "strdup",
            "my::alloc::thing",
            "Vec::push",
        ] {
            assert!(!is_allocator_function(name), "{name}");
        }
    }
}
