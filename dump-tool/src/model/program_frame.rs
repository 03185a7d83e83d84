//! The program's frame of a stack: its innermost frame in the program's own
//! code, outside the system's libraries, the language runtime and the
//! standard library. A leak found in `std::_Rb_tree<…>::_M_get_node` or
//! `PyUnicode_New` is named by the program's function that called into
//! them (`svc::Ledger::record`).
//!
//! Owns the one rule of what is "not mine" ([`NotMine`]): by module (the
//! system's library directories, libc, libstdc++, ld.so, libpython…) and
//! by symbol namespace (`std::`, `__gnu_cxx::`, `core::`, `alloc::`,
//! `hashbrown::`, CPython's `Py*`/`_Py*`…) and, for functions inlined into
//! the program, by source directory (`/usr/include/`, the Rust standard
//! library's `/rustc/…`), extended by `--not-mine` and
//! switched off by `--all-mine`; a runtime's named frame (Python,
//! JavaScript, Java) is the program's unless it is that runtime's own
//! library. [`NotMine::classify`] marks every line
//! of the location table once ([`Line::program`]); [`program_frame`] and
//! [`ProgramFrames`] read the marks. No I/O.

use super::allocator::is_allocator_function;
use super::frames::{FrameRef, function_name, line_of};
use super::metric::Metric;
use super::profile::{Profile, Sample};
use crate::symbols::{Line, LocationTable};
use heapsample_format::FrameKind;
use std::collections::HashMap;

/// Module directories of the system's libraries.
const SYSTEM_DIRECTORIES: &[&str] = &[
    "/lib/",
    "/lib32/",
    "/lib64/",
    "/usr/lib/",
    "/usr/lib32/",
    "/usr/lib64/",
    "/usr/libexec/",
];

/// Source directories of the system's headers and the Rust standard
/// library: a function inlined into the program from them (glibc's
/// `getline` wrapper of `__getdelim` in `<bits/stdio.h>`, libstdc++'s
/// templates) is not the program's.
const SYSTEM_SOURCES: &[&str] = &[
    "/usr/include/",
    "/usr/lib/gcc/",
    "/usr/local/include/c++/",
    "/rustc/",
];

/// Module file names (their starts) of the C and C++ runtimes, the loader,
/// language runtimes and allocators, wherever they are installed.
const RUNTIME_MODULES: &[&str] = &[
    "libc.so",
    "libc-",
    "libm.so",
    "libpthread",
    "libdl.so",
    "librt.so",
    "ld-linux",
    "ld-musl",
    "ld.so",
    "libstdc++",
    "libc++",
    "libgcc_s",
    "libpython",
    "libjvm.so",
    "libnode.so",
    "libheapsample",
    "libjemalloc",
    "libtcmalloc",
];

/// Packages of the Java platform's own classes.
const JDK_PACKAGES: &[&str] = &["java.", "javax.", "jdk.", "sun.", "com.sun."];

/// Namespaces (starts of short names) of the C++, Rust and CPython
/// runtimes and standard libraries.
const RUNTIME_PREFIXES: &[&str] = &[
    "std::",
    "__gnu_cxx::",
    "__cxxabiv1::",
    "__cxa_",
    "__gnu_",
    "__libc_",
    "__GI_",
    "_IO_",
    "core::",
    "alloc::",
    "hashbrown::",
    "__rust_",
    "__rdl_",
    "__rg_",
    "_dl_",
];

/// Self types of Rust `<T as Trait>::f` and `<T>::f` names that are the
/// standard library's or a primitive's (`<[u8]>::to_vec`,
/// `<str as alloc::borrow::ToOwned>::to_owned`).
const RUNTIME_SELF_TYPES: &[&str] = &[
    "std::",
    "core::",
    "alloc::",
    "hashbrown::",
    "[",
    "&",
    "*",
    "(",
    "str",
    "bool",
    "char",
    "u8",
    "u16",
    "u32",
    "u64",
    "u128",
    "usize",
    "i8",
    "i16",
    "i32",
    "i64",
    "i128",
    "isize",
    "f32",
    "f64",
];

/// What is not the program's own code. The default is the system's
/// libraries and the C, C++, Rust and CPython runtimes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NotMine {
    /// More modules (a path's start, or a file name's start) and name
    /// prefixes (`--not-mine`): an entry with a `/` or `.so` is a module.
    pub extra: Vec<String>,
    /// Every named frame is the program's (`--all-mine`).
    pub all_mine: bool,
}

impl NotMine {
    /// Mark every line of `table` ([`Line::program`]): lines of a module
    /// by this rule, placeholders and synthetic frames (no module) never.
    pub fn classify(&self, table: &mut LocationTable) {
        let modules: Vec<bool> = table
            .modules
            .iter()
            .map(|module| self.module_is_mine(&module.path))
            .collect();
        for location in &mut table.locations {
            let module_mine = location.module.and_then(|m| modules.get(m).copied());
            for line in &mut location.lines {
                // A frame of the program's module without a symbol
                // (`prog+0x384c`, a stripped program) is still its code.
                line.program = match module_mine {
                    None => self.script_is_mine(line),
                    Some(mine) => mine && (!location.resolved || self.name_is_mine(line)),
                };
            }
        }
    }

    /// A frame a runtime named in the program's language (a Python, a
    /// JavaScript or a Java function) is the program's, unless it is that
    /// runtime's own library (CPython's `lib/python3.x`, Node's `node:`
    /// modules, the JDK's `java.`/`jdk.`… classes) or named "not mine".
    /// The interpreter, unnamed JIT code and placeholders never are.
    fn script_is_mine(&self, line: &Line) -> bool {
        let file = line.file.as_deref().unwrap_or("");
        let library = match line.kind {
            FrameKind::Python => {
                file.contains("/lib/python3")
                    || SYSTEM_DIRECTORIES.iter().any(|d| file.starts_with(d))
            }
            FrameKind::JavaScript => file.starts_with("node:") || file.starts_with("internal/"),
            FrameKind::Java => JDK_PACKAGES.iter().any(|p| line.function.starts_with(p)),
            FrameKind::Native | FrameKind::Interpreter | FrameKind::Jit => return false,
        };
        self.all_mine || !(library || self.named_not_mine(line))
    }

    /// True unless the module at `path` is a system library or a runtime.
    pub fn module_is_mine(&self, path: &str) -> bool {
        if self.all_mine {
            return true;
        }
        let file = path.rsplit('/').next().unwrap_or(path);
        let system = SYSTEM_DIRECTORIES.iter().any(|d| path.starts_with(d))
            || RUNTIME_MODULES.iter().any(|m| file.starts_with(m))
            || is_runtime_executable(file);
        let extra = self
            .extra
            .iter()
            .filter(|e| is_module_entry(e))
            .any(|e| path.starts_with(e.as_str()) || file.starts_with(e.as_str()));
        !(system || extra)
    }

    /// True unless the function of `line` is the runtime's by its name.
    pub fn name_is_mine(&self, line: &Line) -> bool {
        if self.all_mine {
            return true;
        }
        let short = line.short.as_str();
        let system_source = line
            .file
            .as_deref()
            .is_some_and(|file| SYSTEM_SOURCES.iter().any(|d| file.starts_with(d)));
        let runtime = system_source
            || is_allocator_function(&line.function)
            || RUNTIME_PREFIXES.iter().any(|p| short.starts_with(p))
            || is_cpython_api(short)
            || runtime_self_type(short);
        !(runtime || self.named_not_mine(line))
    }

    /// True when `--not-mine` names `line`'s function by a prefix.
    fn named_not_mine(&self, line: &Line) -> bool {
        self.extra
            .iter()
            .filter(|e| !is_module_entry(e))
            .any(|e| line.short.starts_with(e.as_str()) || line.function.starts_with(e.as_str()))
    }
}

/// The interpreters' and virtual machines' own executables, wherever they
/// are installed (`node`, `java`, `python3.12`): their code is the
/// runtime's, the script's frames above it are the program's.
fn is_runtime_executable(file: &str) -> bool {
    let python_version = file
        .strip_prefix("python")
        .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit() || c == '.'));
    matches!(file, "node" | "nodejs" | "java") || python_version
}

fn is_module_entry(entry: &str) -> bool {
    entry.contains('/') || entry.contains(".so")
}

/// CPython's API and internals: `Py` or `_Py` then a capital or `_`
/// (`PyUnicode_New`, `_PyLong_New`, `Py_INCREF`; not `Python_helper`).
fn is_cpython_api(name: &str) -> bool {
    let rest = name.strip_prefix("_Py").or_else(|| name.strip_prefix("Py"));
    rest.and_then(|r| r.chars().next())
        .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
}

/// `<T as Trait>::f` or `<T>::f` whose `T` is the standard library's or a
/// primitive type.
fn runtime_self_type(name: &str) -> bool {
    let Some(inner) = name.strip_prefix('<') else {
        return false;
    };
    RUNTIME_SELF_TYPES.iter().any(|t| {
        inner.strip_prefix(t).is_some_and(|rest| {
            // A path or punctuation type matches by its start; a primitive
            // only as a whole word (`<u8>`, `<str as …>`, not `<u8x4>`).
            t.ends_with("::")
                || !t.chars().all(|c| c.is_ascii_alphanumeric())
                || rest.starts_with('>')
                || rest.starts_with(' ')
        })
    })
}

/// The innermost frame of `sample` in the program's own code (the leaf
/// itself when it is), `None` when every frame is the runtime's.
pub fn program_frame(sample: &Sample, table: &LocationTable) -> Option<FrameRef> {
    sample
        .frames
        .iter()
        .copied()
        .find(|&frame| line_of(table, frame).is_some_and(|line| line.program))
}

/// The name of [`program_frame`], `None` when there is none.
pub fn program_frame_name<'a>(sample: &Sample, table: &'a LocationTable) -> Option<&'a str> {
    program_frame(sample, table).map(|frame| function_name(table, frame))
}

/// The program frame of each ranked row: for every key (a function, as a
/// report names it), the program frame carrying most of its value.
#[derive(Clone, Debug, Default)]
pub struct ProgramFrames {
    by_key: HashMap<String, HashMap<String, f64>>,
}

impl ProgramFrames {
    /// The program frames of `profile`'s samples, by `key` of each sample
    /// (its leaf function for the reports), weighed by `metric`.
    pub fn of(
        profile: &Profile,
        table: &LocationTable,
        metric: Metric,
        key: impl Fn(&Sample) -> String,
    ) -> ProgramFrames {
        let mut frames = ProgramFrames::default();
        frames.add(profile, table, metric, key);
        frames
    }

    /// Add another profile's samples (a series).
    pub fn add(
        &mut self,
        profile: &Profile,
        table: &LocationTable,
        metric: Metric,
        key: impl Fn(&Sample) -> String,
    ) {
        for sample in &profile.samples {
            let Some(name) = program_frame_name(sample, table) else {
                continue;
            };
            let weight = metric.of(&sample.values).abs();
            *self
                .by_key
                .entry(key(sample))
                .or_default()
                .entry(name.to_string())
                .or_default() += weight;
        }
    }

    /// The program frame of `key`: the one carrying most of its value (by
    /// name on a tie); `None` when none of its stacks has one.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.by_key.get(key).and_then(|frames| {
            frames
                .iter()
                .max_by(|a, b| a.1.total_cmp(b.1).then_with(|| b.0.cmp(a.0)))
                .map(|(name, _)| name.as_str())
        })
    }
}

/// A leaf function's key in the reports: its shown name (`??` without
/// frames).
pub fn leaf_name<'a>(sample: &Sample, table: &'a LocationTable) -> &'a str {
    sample
        .frames
        .first()
        .map_or("??", |&frame| function_name(table, frame))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::names::Language;

    fn cxx(name: &str) -> Line {
        Line::named(name.to_string(), Language::Cxx, None, 0)
    }

    fn rust(name: &str) -> Line {
        Line::named(name.to_string(), Language::Rust, None, 0)
    }

    fn c(name: &str) -> Line {
        Line::named(name.to_string(), Language::Other, None, 0)
    }

    #[test]
    fn runtime_names_are_not_mine() {
        let rules = NotMine::default();
        for line in [
            cxx(
                "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::_M_construct<char const*>(char const*, char const*, std::forward_iterator_tag)",
            ),
            cxx(
                "std::_Rb_tree<int, std::pair<int const, int>, std::_Select1st<std::pair<int const, int> >, std::less<int>, std::allocator<std::pair<int const, int> > >::_M_get_node()",
            ),
            cxx(
                "std::unique_ptr<svc::Entry, std::default_delete<svc::Entry> > std::make_unique<svc::Entry>()",
            ),
            cxx("__gnu_cxx::new_allocator<int>::allocate(unsigned long, void const*)"),
            cxx("operator new(unsigned long)"),
            rust("alloc::raw_vec::RawVec<T,A>::grow_one"),
            rust("hashbrown::raw::RawTable<T,A>::reserve_rehash"),
            rust("<alloc::vec::Vec<T> as core::clone::Clone>::clone"),
            rust("<[u8]>::to_vec"),
            rust("<str as alloc::borrow::ToOwned>::to_owned"),
            rust("std::collections::hash::map::HashMap<K,V,S>::insert"),
            rust("core::ops::function::FnOnce::call_once"),
            c("PyUnicode_New"),
            c("_PyLong_New"),
            c("Py_INCREF"),
            c("malloc"),
            c("__libc_start_main"),
            Line::named(
                "getline".into(),
                Language::Other,
                Some("/usr/include/x86_64-linux-gnu/bits/stdio.h".into()),
                117,
            ),
        ] {
            assert!(!rules.name_is_mine(&line), "{}", line.function);
        }
    }

    #[test]
    fn program_names_are_mine() {
        let rules = NotMine::default();
        for line in [
            cxx(
                "svc::Ledger::record(std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&, long)",
            ),
            cxx("make_sessions(int)"),
            cxx("(anonymous namespace)::make_sessions(int)"),
            cxx("void svc::fill<int>(std::vector<int, std::allocator<int> >&)"),
            rust("rust_prog::leak_into_map"),
            rust("<rust_prog::Cache as core::clone::Clone>::clone"),
            rust("<u8x4>::new"),
            c("Python_helper"),
            c("main"),
            c("read_lines"),
            c("stdout_writer"),
        ] {
            assert!(rules.name_is_mine(&line), "{}", line.function);
        }
    }

    fn script(function: &str, file: Option<&str>, kind: FrameKind) -> Line {
        let mut line = Line::named(
            function.to_string(),
            Language::Other,
            file.map(String::from),
            0,
        );
        line.kind = kind;
        line
    }

    #[test]
    fn a_runtimes_named_frame_is_mine_unless_it_is_the_runtimes_library() {
        let rules = NotMine::default();
        let mine = [
            script(
                "make_record (rt_leak.py)",
                Some("/srv/app/rt_leak.py"),
                FrameKind::Python,
            ),
            script(
                "handleRequest (rt_leak.js)",
                Some("/srv/app/rt_leak.js"),
                FrameKind::JavaScript,
            ),
            script("RtLeak.makeCompressor", None, FrameKind::Java),
        ];
        let not_mine = [
            script(
                "dumps (__init__.py)",
                Some("/usr/lib/python3.12/json/__init__.py"),
                FrameKind::Python,
            ),
            script(
                "allocUnsafeSlow (buffer)",
                Some("node:buffer"),
                FrameKind::JavaScript,
            ),
            script("java.util.zip.Deflater.<init>", None, FrameKind::Java),
            script("[java: interpreted]", None, FrameKind::Interpreter),
            script("[jit]", None, FrameKind::Jit),
        ];
        for line in &mine {
            assert!(rules.script_is_mine(line), "{}", line.function);
        }
        for line in &not_mine {
            assert!(!rules.script_is_mine(line), "{}", line.function);
        }
        let narrower = NotMine {
            extra: vec!["RtLeak.".into()],
            all_mine: false,
        };
        assert!(!narrower.script_is_mine(&mine[2]));
        let everything = NotMine {
            extra: Vec::new(),
            all_mine: true,
        };
        assert!(everything.script_is_mine(&not_mine[2]));
        assert!(
            !everything.script_is_mine(&not_mine[4]),
            "unnamed code is nobody's"
        );
    }

    #[test]
    fn modules_by_directory_and_name() {
        let rules = NotMine::default();
        for path in [
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            "/lib/x86_64-linux-gnu/libstdc++.so.6",
            "/lib64/ld-linux-x86-64.so.2",
            "/opt/python/lib/libpython3.12.so.1.0",
            "/work/target/release/libheapsample.so",
            "/usr/local/bin/node",
            "/opt/jdk-17/bin/java",
            "/root/.pyenv/versions/3.12.1/bin/python3.12",
            "/opt/jdk-17/lib/server/libjvm.so",
        ] {
            assert!(!rules.module_is_mine(path), "{path}");
        }
        for path in [
            "/usr/bin/sort",
            "/tmp/t/leaky",
            "/opt/svc/lib/libledger.so",
            "/srv/nodes-server",
            "/srv/python-tool",
        ] {
            assert!(rules.module_is_mine(path), "{path}");
        }
    }

    #[test]
    fn flags_extend_and_switch_off_the_rule() {
        let rules = NotMine {
            extra: vec![
                "svc::Ledger::".into(),
                "/opt/svc/lib/".into(),
                "libledger.so".into(),
            ],
            all_mine: false,
        };
        assert!(!rules.name_is_mine(&cxx("svc::Ledger::record(long)")));
        assert!(rules.name_is_mine(&cxx("svc::Server::handle(int)")));
        assert!(!rules.module_is_mine("/opt/svc/lib/libother.so"));
        assert!(!rules.module_is_mine("/srv/libledger.so.1"));
        let all = NotMine {
            extra: Vec::new(),
            all_mine: true,
        };
        assert!(all.name_is_mine(&cxx("std::make_unique<int>()")));
        assert!(all.module_is_mine("/usr/lib/x86_64-linux-gnu/libc.so.6"));
    }
}
