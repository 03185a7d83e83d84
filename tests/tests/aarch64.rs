//! libheapsample.so built for aarch64, run under qemu-user on this machine:
//! real aarch64 programs, cross-compiled at test time with
//! `aarch64-linux-gnu-gcc`/`g++`, preloaded with the aarch64 shim whose path
//! `HEAPSAMPLE_AARCH64_SHIM` names (scripts/test.sh builds it), and their
//! dumps read by this machine's x86_64 `heapdiff`.
//!
//! Each test checks a program's own truth: exact counts and bytes per
//! named function at `lg_prof_sample:0` (every byte sampled, every weight 1),
//! an estimate within a bound derived from the sampling law, call chains of
//! named functions in the right order (with and without frame pointers, and
//! with pointer authentication), and dumps written by each trigger the
//! programs pull.
//!
//! qemu-user runs one process; without binfmt_misc (not available in CI's
//! container) an aarch64 program cannot `execve` another aarch64 program
//! directly, so the exec test and `heapsample run` go through
//! `qemu-aarch64` itself (an x86_64 program: its own loader prints one line
//! saying it ignores the aarch64 preload, which these tests set aside).
//!
//! The programs find their libraries in Debian's multiarch directories
//! (`libc6:arm64`, `libstdc++6:arm64`): qemu 7.2 with `-L
//! /usr/aarch64-linux-gnu` (the cross compiler's copy) hangs in every
//! dynamically linked `pthread_create`, with or without the profiler.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use heapsample_tests::prerequisite::{self, Missing, skip};
use heapsample_tests::*;

const SHIM_VARIABLE: &str = "HEAPSAMPLE_AARCH64_SHIM";

/// The aarch64 shim, the cross compilers and qemu, or a skip (a failure
/// under the test command, which installs and builds them).
fn toolchain() -> Option<PathBuf> {
    for tool in [
        "aarch64-linux-gnu-gcc",
        "aarch64-linux-gnu-g++",
        "qemu-aarch64",
    ] {
        if !prerequisite::on_path(tool) {
            skip(Missing::Software(&format!(
                "{tool} is not installed (apt-get install gcc-aarch64-linux-gnu \
                 g++-aarch64-linux-gnu qemu-user)"
            )));
            return None;
        }
    }
    let shim = std::env::var_os(SHIM_VARIABLE).map(PathBuf::from);
    match shim.filter(|path| path.is_file()) {
        Some(shim) => Some(shim),
        None => {
            skip(Missing::Software(&format!(
                "{SHIM_VARIABLE} names no aarch64 libheapsample.so (scripts/test.sh builds it)"
            )));
            None
        }
    }
}

/// Cross-compile `source` (C, or C++ when `cxx`) into `dir/name` with `flags`.
fn cross_compile(dir: &Path, name: &str, source: &str, cxx: bool, flags: &[&str]) -> PathBuf {
    let extension = if cxx { "cc" } else { "c" };
    let source_path = dir.join(format!("{name}.{extension}"));
    std::fs::write(&source_path, source).expect("write the test program");
    let output = dir.join(name);
    let compiler = if cxx {
        "aarch64-linux-gnu-g++"
    } else {
        "aarch64-linux-gnu-gcc"
    };
    let result = Command::new(compiler)
        .args(["-g", "-o"])
        .arg(&output)
        .arg(&source_path)
        .args(flags)
        .output()
        .expect("run the cross compiler");
    assert!(
        result.status.success(),
        "{compiler} {name}: {}",
        String::from_utf8_lossy(&result.stderr)
    );
    output
}

/// `program` under qemu-aarch64 with the aarch64 shim preloaded and
/// `conf` as `PROF_CONF` (qemu hands its environment to the program).
fn emulated(shim: &Path, program: &Path, conf: &str) -> Run {
    Run::new("qemu-aarch64")
        .arg("-E")
        .arg(format!("LD_PRELOAD={}", shim.display()))
        .arg(program)
        .prof_conf(conf)
        .timeout(Duration::from_secs(120))
}

/// One test's toolchain and directory: the aarch64 shim, and a temporary
/// directory its programs are compiled into.
struct Lab {
    shim: PathBuf,
    dir: TempDir,
}

impl Lab {
    /// The toolchain and a fresh directory `aarch64-<name>`, or a skip
    /// ([`toolchain`]).
    fn new(name: &str) -> Option<Lab> {
        Some(Lab {
            shim: toolchain()?,
            dir: TempDir::new(&format!("aarch64-{name}")),
        })
    }

    /// [`cross_compile`] into the lab's directory.
    fn compile(&self, name: &str, source: &str, cxx: bool, flags: &[&str]) -> PathBuf {
        cross_compile(self.dir.path(), name, source, cxx, flags)
    }

    /// [`emulated`] with the lab's shim.
    fn run(&self, program: &Path, conf: &str) -> Run {
        emulated(&self.shim, program, conf)
    }
}

/// The folded stacks of `outcome`'s final dump for `metric`, once the
/// program exited successfully.
fn final_stacks(outcome: &Outcome, metric: &str) -> Vec<(Vec<String>, i64)> {
    outcome.assert_success();
    let (file, _) = outcome.final_dump();
    folded(&file.path, metric)
}

/// The three ways code keeps (or not) what the walk needs: frame pointers,
/// none (`-fomit-frame-pointer`), and return addresses signed with pointer
/// authentication (`-mbranch-protection=standard`, which qemu's `max` CPU
/// carries out: an unstripped address would name no function).
const WALK_BUILDS: [(&str, &str); 3] = [
    ("frame_pointers", "-fno-omit-frame-pointer"),
    ("no_frame_pointers", "-fomit-frame-pointer"),
    ("pointer_authentication", "-mbranch-protection=standard"),
];

/// The chain every unwinding test checks, outermost first.
const CHAIN: [&str; 4] = ["main", "chain_outer", "chain_middle", "chain_inner"];

/// The sum of the stacks that hold [`CHAIN`].
fn in_chain(stacks: &[(Vec<String>, i64)]) -> i64 {
    stacks
        .iter()
        .filter(|(frames, _)| has_chain(frames, &CHAIN))
        .map(|(_, value)| value)
        .sum()
}

/// heapdiff's folded stacks of `dump` for `metric`: (frames outermost
/// first, value).
fn folded(dump: &Path, metric: &str) -> Vec<(Vec<String>, i64)> {
    parse_folded(&heapdiff_ok(&[
        "--format",
        "folded",
        "-m",
        metric,
        path_str(dump),
    ]))
}

/// The sum of `metric` over stacks whose innermost named frame is `leaf`.
fn by_leaf(stacks: &[(Vec<String>, i64)], leaf: &str) -> i64 {
    stacks
        .iter()
        .filter(|(frames, _)| frames.last().is_some_and(|f| f == leaf))
        .map(|(_, value)| value)
        .sum()
}

/// The stacks that contain `function`, as text for failure messages.
fn render(stacks: &[(Vec<String>, i64)]) -> String {
    stacks
        .iter()
        .map(|(frames, value)| format!("{} {value}", frames.join(";")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// True if `chain` appears in `frames` as consecutive frames, in order.
fn has_chain(frames: &[String], chain: &[&str]) -> bool {
    frames
        .windows(chain.len())
        .any(|window| window.iter().zip(chain).all(|(a, b)| a == b))
}

const COUNTS_C: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define KEPT 700
#define FREED 300
#define THREADS 4
#define PER_THREAD 250
static void *kept[KEPT];
static void *threads_kept[THREADS][PER_THREAD];
__attribute__((noinline)) void *keep_block(size_t n) { void *p = malloc(n); memset(p, 7, n); return p; }
__attribute__((noinline)) void churn_block(size_t n) { void *p = malloc(n); memset(p, 1, n); __asm__ volatile("" : : "r"(p) : "memory"); free(p); }
__attribute__((noinline)) void *zeroed_block(size_t n) { return calloc(n, 1); }
__attribute__((noinline)) void *grown_block(void *p, size_t n) { return realloc(p, n); }
__attribute__((noinline)) void *thread_block(size_t n) { void *p = malloc(n); memset(p, 3, n); return p; }
static void *worker(void *arg) {
  long t = (long)arg;
  for (int i = 0; i < PER_THREAD; i++) threads_kept[t][i] = thread_block(48);
  return NULL;
}
int main(void) {
  for (int i = 0; i < KEPT; i++) kept[i] = keep_block(100);
  for (int i = 0; i < FREED; i++) churn_block(2000);
  void *z = zeroed_block(4096);
  void *g = grown_block(NULL, 10);
  g = grown_block(g, 30000);
  pthread_t ids[THREADS];
  for (long t = 0; t < THREADS; t++) pthread_create(&ids[t], NULL, worker, (void *)t);
  for (int t = 0; t < THREADS; t++) pthread_join(ids[t], NULL);
  printf("kept=%d freed=%d z=%p g=%p\n", KEPT, FREED, z, g);
  return 0;
}
"#;

/// At `lg_prof_sample:0` every allocation is sampled with weight 1: the
/// dump holds exactly what each function allocated and still holds, from
/// malloc, calloc and realloc, on the main thread and on four others.
#[test]
fn exact_counts_per_function_at_lg_0() {
    let Some(lab) = Lab::new("counts") else {
        return;
    };
    let program = lab.compile("counts", COUNTS_C, false, &["-O1", "-pthread"]);
    let outcome = lab.run(&program, "lg_prof_sample:0").run();
    outcome.assert_success();
    assert!(
        outcome.stdout.starts_with("kept=700 freed=300"),
        "{}",
        outcome.context()
    );
    let (file, dump) = outcome.final_dump();
    assert_eq!(
        dump.context.architecture,
        "aarch64",
        "{}",
        outcome.context()
    );
    let inuse_objects = folded(&file.path, "inuse-objects");
    let inuse_space = folded(&file.path, "inuse-space");
    let alloc_objects = folded(&file.path, "alloc-objects");
    let context = render(&alloc_objects);
    assert_eq!(by_leaf(&inuse_objects, "keep_block"), 700, "{context}");
    assert_eq!(by_leaf(&inuse_space, "keep_block"), 70_000, "{context}");
    assert_eq!(by_leaf(&alloc_objects, "churn_block"), 300, "{context}");
    assert_eq!(by_leaf(&inuse_objects, "churn_block"), 0, "{context}");
    assert_eq!(by_leaf(&inuse_space, "zeroed_block"), 4096, "{context}");
    // realloc(NULL, 10) then a move to 30000 bytes: two allocations, the
    // second one live.
    assert_eq!(by_leaf(&alloc_objects, "grown_block"), 2, "{context}");
    assert_eq!(by_leaf(&inuse_space, "grown_block"), 30_000, "{context}");
    assert_eq!(by_leaf(&inuse_objects, "thread_block"), 1000, "{context}");
    let thread_stacks: Vec<_> = inuse_objects
        .iter()
        .filter(|(frames, _)| frames.last().is_some_and(|f| f == "thread_block"))
        .collect();
    assert!(
        thread_stacks
            .iter()
            .all(|(frames, _)| has_chain(frames, &["worker", "thread_block"])),
        "{context}"
    );
}

const ESTIMATE_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define COUNT 40000
#define SIZE 256
static void *kept[COUNT], *zeroed[COUNT], *grown[COUNT];
__attribute__((noinline)) void *estimated_block(size_t n) { void *p = malloc(n); memset(p, 5, n); return p; }
__attribute__((noinline)) void *estimated_zeroed(size_t n) { return calloc(1, n); }
__attribute__((noinline)) void *estimated_grown(void *p, size_t n) { return realloc(p, n); }
int main(void) {
  for (int i = 0; i < COUNT; i++) kept[i] = estimated_block(SIZE);
  for (int i = 0; i < COUNT; i++) zeroed[i] = estimated_zeroed(SIZE);
  for (int i = 0; i < COUNT; i++) grown[i] = estimated_grown(estimated_grown(NULL, SIZE / 2), SIZE);
  printf("bytes=%d\n", COUNT * SIZE);
  return 0;
}
"#;

/// At a 16 KiB mean period the estimate of 40,000 × 256 live bytes is
/// within its bound, for each of malloc, calloc and realloc (the fast
/// paths, which lg 0 never takes, and the crossings). The number of samples is close to Poisson with mean
/// 10,240,000 / 16,384 = 625 (a 256-byte block is sampled with probability
/// 1 − e^(−256/16384) ≈ 1.55 %, so 620 expected); each sample's weight is
/// the same, so the estimate's relative standard deviation is 1/√620 ≈ 4.0 %.
/// The bound of 25 % is more than 6 standard deviations: a false failure
/// less than once in 10⁸ runs for the three checks together. (realloc's
/// first, 128-byte blocks are freed by the second call: only the 256-byte
/// ones are live.)
#[test]
fn sampled_estimate_within_its_bound() {
    let Some(lab) = Lab::new("estimate") else {
        return;
    };
    let program = lab.compile("estimate", ESTIMATE_C, false, &["-O1"]);
    let stacks = final_stacks(&lab.run(&program, "lg_prof_sample:14").run(), "inuse-space");
    for function in ["estimated_block", "estimated_zeroed", "estimated_grown"] {
        let estimate = by_leaf(&stacks, function) as f64;
        let truth = 40_000.0 * 256.0;
        let error = (estimate - truth).abs() / truth;
        assert!(
            error < 0.25,
            "{function}: estimate {estimate} against {truth}: {error:.3} off\n{}",
            render(&stacks)
        );
    }
}

/// The frame chain that every unwinding test checks, outermost first.
const CHAIN_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define COUNT 200
static void *kept[COUNT];
__attribute__((noinline)) void *chain_inner(size_t n) { void *p = malloc(n); memset(p, 9, n); return p; }
__attribute__((noinline)) void *chain_middle(size_t n) { void *p = chain_inner(n + 1); __asm__ volatile("" ::: "memory"); return p; }
__attribute__((noinline)) void *chain_outer(size_t n) { void *p = chain_middle(n + 1); __asm__ volatile("" ::: "memory"); return p; }
int main(void) {
  for (int i = 0; i < COUNT; i++) kept[i] = chain_outer(64);
  printf("%p\n", kept[COUNT - 1]);
  return 0;
}
"#;

/// The chain main → chain_outer → chain_middle → chain_inner, with exact
/// counts, whatever the code keeps: frame pointers, none
/// (`-fomit-frame-pointer`), or return addresses signed with pointer
/// authentication (`-mbranch-protection=standard`, which qemu's `max` CPU
/// carries out: an unstripped address would name no function).
#[test]
fn unwinding_with_and_without_frame_pointers_and_with_pointer_authentication() {
    let Some(lab) = Lab::new("unwind") else {
        return;
    };
    for (name, flag) in WALK_BUILDS {
        let program = lab.compile(name, CHAIN_C, false, &["-O2", flag]);
        let outcome = lab
            .run(&program, "lg_prof_sample:0")
            .env("QEMU_CPU", "max")
            .run();
        let stacks = final_stacks(&outcome, "inuse-objects");
        assert_eq!(in_chain(&stacks), 200, "{name}:\n{}", render(&stacks));
        let (file, _) = outcome.final_dump();
        let text = heapdiff_ok(&["--format", "text", path_str(&file.path)]);
        assert!(
            text.contains("chain_inner") && text.contains("aarch64"),
            "{name}:\n{text}"
        );
    }
}

const CXX_CC: &str = r#"
#include <cstdio>
#include <new>
struct Node { char payload[72]; Node *next; };
__attribute__((noinline)) Node *make_node(Node *next) { Node *n = new Node; n->next = next; return n; }
__attribute__((noinline)) char *make_array(int n) { return new char[n]; }
__attribute__((noinline)) void *make_nothrow(std::size_t n) { return ::operator new(n, std::nothrow); }
int main() {
  Node *list = nullptr;
  for (int i = 0; i < 500; i++) list = make_node(list);
  for (int i = 0; i < 200; i++) { Node *gone = make_node(nullptr); delete gone; }
  char *arrays[50];
  for (int i = 0; i < 50; i++) arrays[i] = make_array(1000);
  for (int i = 0; i < 25; i++) delete[] arrays[i];
  void *raw = make_nothrow(333);
  std::printf("%p %p %p\n", (void *)list, (void *)arrays[49], raw);
  return 0;
}
"#;

/// C++ `new`, `new[]`, the nothrow `new`, `delete` and `delete[]`, counted
/// exactly per function at `lg_prof_sample:0`.
#[test]
fn cxx_new_and_delete_counted_exactly() {
    let Some(lab) = Lab::new("cxx") else { return };
    let program = lab.compile("cxx", CXX_CC, true, &["-O1"]);
    let outcome = lab.run(&program, "lg_prof_sample:0").run();
    outcome.assert_success();
    let (file, _) = outcome.final_dump();
    let inuse = folded(&file.path, "inuse-objects");
    let allocated = folded(&file.path, "alloc-objects");
    let space = folded(&file.path, "inuse-space");
    let context = render(&allocated);
    let node = |stacks: &[(Vec<String>, i64)]| {
        stacks
            .iter()
            .filter(|(frames, _)| frames.iter().any(|f| f.starts_with("make_node")))
            .map(|(_, value)| value)
            .sum::<i64>()
    };
    let named = |stacks: &[(Vec<String>, i64)], name: &str| {
        stacks
            .iter()
            .filter(|(frames, _)| frames.iter().any(|f| f.starts_with(name)))
            .map(|(_, value)| value)
            .sum::<i64>()
    };
    assert_eq!(node(&allocated), 700, "{context}");
    assert_eq!(node(&inuse), 500, "{context}");
    assert_eq!(named(&allocated, "make_array"), 50, "{context}");
    assert_eq!(named(&inuse, "make_array"), 25, "{context}");
    assert_eq!(named(&space, "make_array"), 25_000, "{context}");
    assert_eq!(named(&space, "make_nothrow"), 333, "{context}");
}

const PLUGIN_C: &str = r#"
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) void *plugin_alloc(size_t n) { void *p = malloc(n); memset(p, 2, n); return p; }
void *plugin_entry(int count) { void *last = 0; for (int i = 0; i < count; i++) last = plugin_alloc(512); return last; }
"#;

const HOST_C: &str = r#"
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <stdlib.h>
#include <signal.h>
int heapsample_dump(const char *path) __attribute__((weak));
/* The signal dump is written by the profiler's thread: wait for its file
   (at most 20 s). */
static int wait_for_signal_dump(void) {
  for (int tries = 0; tries < 400; tries++) {
    DIR *dir = opendir(".");
    struct dirent *entry;
    int found = 0;
    while (dir && (entry = readdir(dir)))
      found |= strstr(entry->d_name, ".s0.prof") != NULL;
    if (dir) closedir(dir);
    if (found) return 1;
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  return 0;
}
int main(int argc, char **argv) {
  void *handle = dlopen(argv[1], RTLD_NOW);
  if (!handle) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
  void *(*entry)(int) = (void *(*)(int))dlsym(handle, "plugin_entry");
  entry(300);
  if (!heapsample_dump) { fprintf(stderr, "no heapsample_dump\n"); return 1; }
  int api = heapsample_dump(NULL);
  raise(SIGUSR2);
  int signal_dump = wait_for_signal_dump();
  dlclose(handle);
  printf("api=%d signal_dump=%d\n", api, signal_dump);
  return 0;
}
"#;

/// Objects loaded with `dlopen` and unloaded with `dlclose` before the
/// exit dump keep their names; the `heapsample_dump` C API and the dump
/// signal each write a dump with the plugin's blocks counted exactly.
#[test]
fn dlopen_dlclose_signal_and_api_dumps() {
    let Some(lab) = Lab::new("dl") else { return };
    let plugin = lab.compile(
        "libplugin.so",
        PLUGIN_C,
        false,
        &["-O1", "-shared", "-fPIC"],
    );
    let host = lab.compile("host", HOST_C, false, &["-O1", "-ldl"]);
    let outcome = lab
        .run(&host, "lg_prof_sample:0,prof_signal:USR2")
        .arg(&plugin)
        .run();
    outcome.assert_success();
    assert!(
        outcome.stdout.contains("api=0 signal_dump=1"),
        "{}",
        outcome.context()
    );
    let files = outcome.dump_files();
    let triggers: Vec<&str> = files.iter().map(|f| f.trigger.as_str()).collect();
    for wanted in ["m", "s", "f"] {
        assert!(
            triggers.contains(&wanted),
            "{triggers:?}\n{}",
            outcome.context()
        );
    }
    for file in &files {
        let stacks = folded(&file.path, "inuse-objects");
        assert_eq!(
            by_leaf(&stacks, "plugin_alloc"),
            300,
            "{}:\n{}",
            file.name,
            render(&stacks)
        );
        assert!(
            stacks
                .iter()
                .filter(|(frames, _)| frames.last().is_some_and(|f| f == "plugin_alloc"))
                .all(|(frames, _)| has_chain(frames, &["main", "plugin_entry", "plugin_alloc"])),
            "{}:\n{}",
            file.name,
            render(&stacks)
        );
    }
}

const FORK_EXEC_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static void *kept[400];
__attribute__((noinline)) void *parent_block(size_t n) { void *p = malloc(n); memset(p, 4, n); return p; }
__attribute__((noinline)) void *child_block(size_t n) { void *p = malloc(n); memset(p, 6, n); return p; }
__attribute__((noinline)) void *before_exec_block(size_t n) { void *p = malloc(n); memset(p, 8, n); return p; }
__attribute__((noinline)) void *exec_target_block(size_t n) { void *p = malloc(n); memset(p, 2, n); return p; }
int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "exec-target") == 0) {
    for (int i = 0; i < 80; i++) kept[i] = exec_target_block(200);
    printf("exec target ran\n");
    return 0;
  }
  for (int i = 0; i < 100; i++) kept[i] = parent_block(128);
  pid_t child = fork();
  if (child == 0) {
    for (int i = 0; i < 150; i++) kept[100 + i] = child_block(64);
    exit(0);
  }
  int status;
  waitpid(child, &status, 0);
  pid_t execer = fork();
  if (execer == 0) {
    for (int i = 0; i < 120; i++) kept[250 + i] = before_exec_block(96);
    execl("/usr/bin/qemu-aarch64", "qemu-aarch64", argv[0], "exec-target", (char *)0);
    _exit(127);
  }
  waitpid(execer, &status, 0);
  printf("children done %d\n", WEXITSTATUS(status));
  return 0;
}
"#;

/// A forked child (`prof_fork_final:all`) writes its own exit dump with its
/// own blocks and the parent's it inherited; a program a forked child
/// `exec`s is a new process, profiled from its start: its dump holds its
/// own blocks and nothing of the child's before the exec.
#[test]
fn fork_and_exec() {
    let Some(lab) = Lab::new("fork") else { return };
    let program = lab.compile("forks", FORK_EXEC_C, false, &["-O1"]);
    let outcome = lab
        .run(&program, "lg_prof_sample:0,prof_fork_final:all")
        .run();
    outcome.assert_success();
    assert!(
        outcome.stdout.contains("exec target ran") && outcome.stdout.contains("children done 0"),
        "{}",
        outcome.context()
    );
    let files = outcome.dump_files();
    let mut seen_child = false;
    let mut seen_exec = false;
    let mut seen_parent = false;
    for file in &files {
        let stacks = folded(&file.path, "inuse-objects");
        let (parent, child, before_exec, exec_target) = (
            by_leaf(&stacks, "parent_block"),
            by_leaf(&stacks, "child_block"),
            by_leaf(&stacks, "before_exec_block"),
            by_leaf(&stacks, "exec_target_block"),
        );
        let described = format!("{}:\n{}", file.name, render(&stacks));
        if child > 0 {
            assert_eq!((parent, child), (100, 150), "{described}");
            seen_child = true;
        }
        assert_eq!(before_exec, 0, "{described}");
        if exec_target > 0 {
            assert_eq!((parent, child, exec_target), (0, 0, 80), "{described}");
            seen_exec = true;
        }
        if file.pid == outcome.pid {
            assert_eq!((parent, child, exec_target), (100, 0, 0), "{described}");
            seen_parent = true;
        }
    }
    assert!(
        seen_child && seen_exec && seen_parent,
        "child {seen_child} exec {seen_exec} parent {seen_parent}: {:?}\n{}",
        files.iter().map(|f| &f.name).collect::<Vec<_>>(),
        outcome.context()
    );
}

/// `heapsample run` built for aarch64 starts a program with the profiler
/// and names its dump; `attach` refuses in one line without touching the
/// process.
#[test]
fn launcher_runs_and_refuses_attach() {
    let Some(lab) = Lab::new("launcher") else {
        return;
    };
    let shim = &lab.shim;
    let launcher = shim.with_file_name("heapsample");
    assert!(launcher.is_file(), "{} is not built", launcher.display());
    let program = lab.compile("estimate", ESTIMATE_C, false, &["-O1"]);
    let out = lab.dir.path().join("out");
    let run = Command::new("qemu-aarch64")
        .arg(&launcher)
        .args(["run", "--library"])
        .arg(shim)
        .arg("-o")
        .arg(&out)
        .args(["--", "qemu-aarch64"])
        .arg(&program)
        .output()
        .expect("run the launcher");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&run.stdout), "bytes=10240000\n");
    let dumps = dump_files_in(&out);
    assert_eq!(dumps.len(), 1, "{stderr}");
    assert!(stderr.contains("1 dump in"), "{stderr}");
    let stacks = folded(&dumps[0].path, "inuse-space");
    assert!(
        by_leaf(&stacks, "estimated_block") > 0,
        "{}",
        render(&stacks)
    );

    let mut sleeper = Command::new("sleep").arg("30").spawn().expect("sleep");
    let attach = Command::new("qemu-aarch64")
        .arg(&launcher)
        .args(["attach", &sleeper.id().to_string()])
        .output()
        .expect("run the launcher");
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let stderr = String::from_utf8_lossy(&attach.stderr);
    assert!(!attach.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("heapsample: attach is not supported on aarch64 yet: process "),
        "{stderr}"
    );
}

const INLINE_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void *kept[100];
static inline __attribute__((always_inline)) void *inlined_helper(size_t n) {
  void *p = malloc(n);
  memset(p, 1, n);
  return p;
}
__attribute__((noinline)) void *outer_with_inline(size_t n) { return inlined_helper(n); }
int main(void) {
  for (int i = 0; i < 100; i++) kept[i] = outer_with_inline(80);
  printf("%p\n", kept[99]);
  return 0;
}
"#;

/// The x86_64 heapdiff expands an aarch64 binary's inlined frames from its
/// DWARF: a function inlined into its caller appears as its own frame,
/// inside the caller, with exactly what it allocated.
#[test]
fn inlined_frames_of_an_aarch64_binary() {
    let Some(lab) = Lab::new("inline") else {
        return;
    };
    let program = lab.compile("inline", INLINE_C, false, &["-O2"]);
    let stacks = final_stacks(&lab.run(&program, "lg_prof_sample:0").run(), "inuse-space");
    let inlined: i64 = stacks
        .iter()
        .filter(|(frames, _)| has_chain(frames, &["main", "outer_with_inline", "inlined_helper"]))
        .map(|(_, value)| value)
        .sum();
    assert_eq!(inlined, 8000, "{}", render(&stacks));
}

const BLOCKED_C: &str = r#"
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static void *kept[64];
__attribute__((noinline)) void *blocked_block(size_t n) { void *p = malloc(n); memset(p, 1, n); return p; }
static int has_signal_dump(pid_t pid) {
  char wanted[64];
  snprintf(wanted, sizeof wanted, ".%d.", (int)pid);
  DIR *dir = opendir(".");
  struct dirent *entry;
  int found = 0;
  while (dir && (entry = readdir(dir)))
    found |= strstr(entry->d_name, wanted) && strstr(entry->d_name, ".s0.prof");
  if (dir) closedir(dir);
  return found;
}
int main(void) {
  int ready[2];
  if (pipe(ready)) return 2;
  pid_t child = fork();
  if (child == 0) {
    for (int i = 0; i < 64; i++) kept[i] = blocked_block(1000);
    close(ready[1]);
    for (;;) { struct timespec t = {10, 0}; nanosleep(&t, NULL); }
  }
  close(ready[1]);
  char byte;
  read(ready[0], &byte, 1);
  struct timespec settle = {0, 100 * 1000 * 1000};
  nanosleep(&settle, NULL);
  kill(child, SIGUSR2);
  int dumped = 0;
  for (int tries = 0; tries < 400 && !dumped; tries++) {
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
    dumped = has_signal_dump(child);
  }
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  printf("child signal_dump=%d\n", dumped);
  return !dumped;
}
"#;

/// The dump signal reaches a process blocked in `nanosleep` (the signal
/// context's pc at or just after an `svc`): its signal dump holds exactly
/// the 64 blocks it allocated, and the sleep goes on.
#[test]
fn signal_dump_of_a_process_blocked_in_a_system_call() {
    let Some(lab) = Lab::new("blocked") else {
        return;
    };
    let program = lab.compile("blocked", BLOCKED_C, false, &["-O1"]);
    let outcome = lab.run(&program, "lg_prof_sample:0,prof_signal:USR2").run();
    outcome.assert_success();
    assert!(
        outcome.stdout.contains("child signal_dump=1"),
        "{}",
        outcome.context()
    );
    let signal_dumps: Vec<_> = outcome
        .dump_files()
        .into_iter()
        .filter(|file| file.trigger == "s")
        .collect();
    assert_eq!(signal_dumps.len(), 1, "{}", outcome.context());
    let stacks = folded(&signal_dumps[0].path, "inuse-objects");
    assert_eq!(by_leaf(&stacks, "blocked_block"), 64, "{}", render(&stacks));
}

const SIGNALS_C: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#define RAISED 40
static void *kept[RAISED + 1];
static volatile int raised, alarmed;
static volatile long spins;
__attribute__((noinline)) void *handler_block(size_t n) { void *p = malloc(n); memset(p, 5, n); return p; }
__attribute__((noinline)) void on_signal(int s) { (void)s; kept[raised] = handler_block(300); raised = raised + 1; }
__attribute__((noinline)) void on_alarm(int s) { (void)s; kept[RAISED] = handler_block(300); alarmed = 1; }
__attribute__((noinline)) void raising_here(void) { raise(SIGUSR1); __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) void spinning_here(void) { while (!alarmed) spins = spins + 1; }
int main(void) {
  signal(SIGUSR1, on_signal);
  signal(SIGALRM, on_alarm);
  for (int i = 0; i < RAISED; i++) raising_here();
  struct itimerval once = {{0, 0}, {0, 20000}};
  setitimer(ITIMER_REAL, &once, NULL);
  spinning_here();
  printf("raised=%d alarmed=%d\n", raised, alarmed);
  return 0;
}
"#;

/// The named frames of `stacks` (heapdiff names an address without a
/// symbol, such as the signal trampoline's, by its hex address, which may
/// differ between runs), sorted, with their values.
fn named(stacks: &[(Vec<String>, i64)]) -> Vec<(Vec<String>, i64)> {
    let mut named: Vec<_> = stacks
        .iter()
        .map(|(frames, value)| {
            let frames = frames
                .iter()
                .filter(|frame| !frame.starts_with("0x"))
                .cloned()
                .collect();
            (frames, *value)
        })
        .collect();
    named.sort();
    named
}

/// The project's walk (`prof_unwind:fast`, the default) and libgcc's
/// (`prof_unwind:libgcc`) name the same stacks with the same exact counts,
/// with frame pointers, without them and with pointer authentication.
#[test]
fn the_projects_walk_and_libgccs_agree() {
    let Some(lab) = Lab::new("walks-agree") else {
        return;
    };
    for (name, flag) in WALK_BUILDS {
        let program = lab.compile(name, CHAIN_C, false, &["-O2", flag]);
        let mut by_unwinder = Vec::new();
        for unwinder in ["fast", "libgcc"] {
            let conf = format!("lg_prof_sample:0,prof_unwind:{unwinder}");
            let outcome = lab.run(&program, &conf).env("QEMU_CPU", "max").run();
            by_unwinder.push(named(&final_stacks(&outcome, "alloc-objects")));
        }
        assert_eq!(
            in_chain(&by_unwinder[0]),
            200,
            "{name}:\n{}",
            render(&by_unwinder[0])
        );
        assert_eq!(
            by_unwinder[0],
            by_unwinder[1],
            "{name}: fast\n{}\nlibgcc\n{}",
            render(&by_unwinder[0]),
            render(&by_unwinder[1])
        );
    }
}

/// An allocation in a signal handler is walked through the signal
/// trampoline: below the handler come the function the signal interrupted
/// and its callers, for a signal raised synchronously (`raise`) and for a
/// timer's signal that interrupts a frameless loop (its return address still
/// in x30, read from the signal frame); the same with libgcc.
#[test]
fn a_signal_handlers_allocation_shows_the_interrupted_function() {
    let Some(lab) = Lab::new("signal-walk") else {
        return;
    };
    let program = lab.compile("signals", SIGNALS_C, false, &["-O2"]);
    let mut by_unwinder = Vec::new();
    for unwinder in ["fast", "libgcc"] {
        let conf = format!("lg_prof_sample:0,prof_unwind:{unwinder}");
        let outcome = lab.run(&program, &conf).run();
        outcome.assert_success();
        assert!(
            outcome.stdout.contains("raised=40 alarmed=1"),
            "{}",
            outcome.context()
        );
        let stacks = named(&final_stacks(&outcome, "inuse-objects"));
        let through = |interrupted: &str, handler: &str| -> i64 {
            stacks
                .iter()
                .filter(|(frames, _)| {
                    let at = |name: &str| frames.iter().position(|frame| frame == name);
                    matches!(
                        (at("main"), at(interrupted), at(handler), at("handler_block")),
                        (Some(m), Some(i), Some(h), Some(b)) if m < i && i < h && h < b
                    )
                })
                .map(|(_, value)| value)
                .sum()
        };
        assert_eq!(
            through("raising_here", "on_signal"),
            40,
            "{unwinder}:\n{}",
            render(&stacks)
        );
        assert_eq!(
            through("spinning_here", "on_alarm"),
            1,
            "{unwinder}:\n{}",
            render(&stacks)
        );
        by_unwinder.push(stacks);
    }
    assert_eq!(by_unwinder[0], by_unwinder[1]);
}

/// A library whose one export allocates; built twice with frames of 640 and
/// 4,032 bytes (`BIG`) and the same code offsets (gcc 12: its call to malloc
/// returns to the same address in both), so a rule kept from the first
/// library would step the second one's frame wrongly. Both
/// are linked at one address, which the loader asks `mmap` for when the
/// program is no PIE (glibc's load bias then follows the library's own
/// addresses): the second lands where the first was unloaded (qemu-user's
/// `mmap` would otherwise place it further on).
const SWAPPED_LIBRARY_C: &str = r#"
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) void *lib_alloc(size_t n) {
  volatile char frame[BIG];
  frame[0] = (char)n;
  void *p = malloc(n + frame[0] * 0);
  memset(p, 5, n);
  return p;
}
"#;

/// Where both libraries of the varying-stacks test are linked.
const LIBRARY_ADDRESS: &str = "-Wl,-Ttext-segment=0x4000000000";

const VARYING_C: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void *volatile sink;
__attribute__((noinline)) void *leaf_site(size_t n) { void *p = malloc(n); memset(p, 1, n); return p; }
__attribute__((noinline)) void *path_a(size_t n) { void *p = leaf_site(n); sink = p; return p; }
__attribute__((noinline)) void *path_b(size_t n) { volatile long pad[6]; pad[0] = 1; void *p = leaf_site(n + pad[0] - 1); sink = p; return p; }
__attribute__((noinline)) void *recurse(int depth) {
  volatile char frame[24 + depth * 8];
  frame[0] = (char)depth;
  void *p = depth == 0 ? leaf_site(32) : recurse(depth - 1);
  sink = p;
  return frame[0] >= 0 ? p : 0;
}
__attribute__((noinline)) void drive(void) {
  for (int i = 0; i < 140; i++) {
    recurse(i % 7);
    if (i % 7 == 2) path_a(40);
    if (i % 7 == 5) path_b(48);
    if (i % 7 == 6 && i % 2 == 0) path_a(40);
  }
}
typedef void *(*alloc_fn)(size_t);
static void *base_of(alloc_fn fn) { Dl_info info; return dladdr((void *)fn, &info) ? info.dli_fbase : 0; }
__attribute__((noinline)) void use_one(alloc_fn fn) { for (int i = 0; i < 40; i++) { sink = fn(64); recurse(i % 3); } }
__attribute__((noinline)) void use_two(alloc_fn fn) { for (int i = 0; i < 25; i++) { sink = fn(80); recurse(i % 4); } }
int main(int argc, char **argv) {
  drive();
  void *one = dlopen(argv[1], RTLD_NOW);
  if (!one) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
  alloc_fn first = (alloc_fn)dlsym(one, "lib_alloc");
  void *first_base = base_of(first);
  use_one(first);
  dlclose(one);
  void *two = dlopen(argv[2], RTLD_NOW);
  if (!two) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
  alloc_fn second = (alloc_fn)dlsym(two, "lib_alloc");
  use_two(second);
  printf("same_base=%d\n", first_base == base_of(second));
  return 0;
}
"#;

/// The call chains the walk must give `VARYING_C`, each with its exact count
/// at lg 0 (outermost first, from `main`): recursion of every depth 0–6
/// (20 times each from `drive`, and from `use_one`/`use_two` between the
/// library's allocations), two paths to one allocation site, and a library
/// unloaded and another loaded at its address.
fn varying_truth() -> Vec<(Vec<String>, i64)> {
    let chain = |middle: &[&str], depth: usize, leaf: &str| {
        let mut frames: Vec<String> = std::iter::once("main")
            .chain(middle.iter().copied())
            .map(String::from)
            .collect();
        frames.extend(std::iter::repeat_n("recurse".to_string(), depth));
        frames.push(leaf.to_string());
        frames
    };
    let mut truth = Vec::new();
    for depth in 0..7 {
        truth.push((chain(&["drive"], depth + 1, "leaf_site"), 20));
    }
    // use_one recurses to depth i % 3 for i < 40; use_two to i % 4 for i < 25.
    for depth in 0..3 {
        let times = (0..40).filter(|i| i % 3 == depth).count() as i64;
        truth.push((chain(&["use_one"], depth + 1, "leaf_site"), times));
    }
    for depth in 0..4 {
        let times = (0..25).filter(|i| i % 4 == depth).count() as i64;
        truth.push((chain(&["use_two"], depth + 1, "leaf_site"), times));
    }
    let paths_a = (0..140).filter(|i| i % 7 == 2 || (i % 7 == 6 && i % 2 == 0));
    truth.push((
        chain(&["drive", "path_a"], 0, "leaf_site"),
        paths_a.count() as i64,
    ));
    truth.push((chain(&["drive", "path_b"], 0, "leaf_site"), 20));
    // heapdiff names each library's frame with the library mapped at the time.
    truth.push((chain(&["use_one"], 0, "lib_alloc [libfirst.so]"), 40));
    truth.push((chain(&["use_two"], 0, "lib_alloc [libsecond.so]"), 25));
    truth.sort();
    truth
}

/// Stacks that vary from one allocation to the next, where the rule caches
/// (and a memo of the last walk) could return a stale caller: recursion of
/// varying depth, two paths to one allocation site, and a library unloaded
/// and a different one (other frame layouts at the same offsets) loaded at
/// its address. At lg 0 every call chain has exactly the program's count,
/// with and without frame pointers and with pointer authentication.
#[test]
fn varying_stacks_and_a_library_replaced_at_its_address() {
    let Some(lab) = Lab::new("varying") else {
        return;
    };
    let library = |name, big| {
        let flags = ["-O2", "-shared", "-fPIC", big, LIBRARY_ADDRESS];
        lab.compile(name, SWAPPED_LIBRARY_C, false, &flags)
    };
    let first = library("libfirst.so", "-DBIG=600");
    let second = library("libsecond.so", "-DBIG=4000");
    for (build, flag) in WALK_BUILDS {
        let name = format!("varying_{build}");
        let flags = [
            "-O2",
            "-no-pie",
            "-fno-optimize-sibling-calls",
            "-fno-ipa-icf",
            "-ldl",
            flag,
        ];
        let program = lab.compile(&name, VARYING_C, false, &flags);
        let outcome = lab
            .run(&program, "lg_prof_sample:0")
            .env("QEMU_CPU", "max")
            .arg(&first)
            .arg(&second)
            .run();
        outcome.assert_success();
        assert!(
            outcome.stdout.contains("same_base=1"),
            "{name}: the second library was not loaded at the first one's address\n{}",
            outcome.context()
        );
        let mut walked: Vec<(Vec<String>, i64)> = named(&final_stacks(&outcome, "alloc-objects"))
            .into_iter()
            .filter(|(frames, _)| {
                frames
                    .last()
                    .is_some_and(|leaf| leaf == "leaf_site" || leaf.starts_with("lib_alloc"))
            })
            .map(|(frames, value)| {
                let from_main = frames.iter().position(|f| f == "main").unwrap_or(0);
                (frames[from_main..].to_vec(), value)
            })
            .collect();
        walked.sort();
        assert_eq!(walked, varying_truth(), "{name}:\n{}", render(&walked));
    }
}
