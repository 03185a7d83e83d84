//! `heapsample run [OPTIONS] -- CMD ARGS...`: run a command with the
//! profiler preloaded, pass its exit status through, and say where its
//! dumps are.
//!
//! The library goes in front of any `LD_PRELOAD` the command already has;
//! the options are appended to any `PROF_CONF` it has (later keys win).
//! Dumps go to `-o DIR` (the current directory by default) under an
//! absolute prefix, so a descendant that changes directory still writes
//! there. Which descendants write an exit dump is `--descendants`
//! (`prof_fork_final` and `prof_exec_final`). A Python, Node.js or Java
//! command gets its runtime's perf support switched on (`runtime_names`)
//! unless `--no-runtime-names`.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

use clap::{Args, ValueEnum};

use crate::Failure;
use crate::options::{self, DUMP_BASE, ProfileOptions};

/// Which descendants of the command write an exit dump.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Descendants {
    /// Those that took a sample and ran for at least a second.
    Lived,
    /// Those that took a sample.
    Sampled,
    /// Every one.
    All,
    /// None (only the command itself).
    None,
}

impl Descendants {
    fn value(self) -> &'static str {
        match self {
            Descendants::Lived => "lived",
            Descendants::Sampled => "sampled",
            Descendants::All => "all",
            Descendants::None => "none",
        }
    }
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    options: ProfileOptions,
    /// Which descendants (forked or started by exec) write an exit dump.
    #[arg(long, value_enum, default_value = "lived")]
    descendants: Descendants,
    /// Do not switch on the perf support of a Python (3.12+), Node.js or Java
    /// command (which names their functions' frames in the dumps).
    #[arg(long)]
    no_runtime_names: bool,
    /// The command and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

/// The child being run, for the forwarding signal handler (0: none yet).
static CHILD: AtomicI32 = AtomicI32::new(0);

pub fn run(library: Option<PathBuf>, args: RunArgs) -> Result<u8, Failure> {
    let library = crate::library::locate(library)?;
    let dir = args.options.output_dir()?;
    options::ensure_directory(&dir)?;
    let mut items = Vec::new();
    if let Some(existing) = std::env::var_os("PROF_CONF") {
        items.push(existing.to_string_lossy().into_owned());
    }
    let descendants = args.descendants.value();
    items.push(format!("prof_fork_final:{descendants}"));
    items.push(format!("prof_exec_final:{descendants}"));
    items.extend(args.options.items()?);
    let mut preload = OsString::from(&library);
    if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(":");
        preload.push(existing);
    }
    let before = dumps_in(&dir);
    let (program, arguments) = args.command.split_first().expect("clap requires a command");
    let mut command = Command::new(program);
    command
        .args(arguments)
        .env("LD_PRELOAD", preload)
        .env("PROF_CONF", options::join(&items));
    if !args.no_runtime_names {
        crate::runtime_names::switch_on(program, &mut command);
    }
    install_signal_forwarding();
    let mut child = command
        .spawn()
        .map_err(|e| Failure::new(format!("cannot run {}: {e}", Path::new(program).display())))?;
    CHILD.store(child.id() as i32, Ordering::Relaxed);
    let status = child.wait()?;
    CHILD.store(0, Ordering::Relaxed);
    let new: Vec<String> = dumps_in(&dir).difference(&before).cloned().collect();
    report(&dir, &new, child.id());
    if let Some(signal) = status.signal() {
        die_by(signal);
        return Ok(128u8.saturating_add(signal as u8));
    }
    Ok(status.code().unwrap_or(1) as u8)
}

/// The dump files in `dir`.
fn dumps_in(dir: &Path) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.starts_with(&format!("{DUMP_BASE}.")) && name.ends_with(".prof"))
        .collect()
}

/// Where the run's dumps are and how to look at them (on stderr, so that
/// the command's standard output stays its own).
fn report(dir: &Path, new: &[String], pid: u32) {
    if new.is_empty() {
        eprintln!(
            "heapsample: no dump was written in {} (the command ran too briefly to sample, \
             or its dumps are off)",
            dir.display()
        );
        return;
    }
    let own = [format!("{DUMP_BASE}.{pid}."), format!("{DUMP_BASE}.{pid}_")];
    let main = new
        .iter()
        .rev()
        .find(|name| own.iter().any(|p| name.starts_with(p.as_str())))
        .unwrap_or(&new[new.len() - 1]);
    let plural = if new.len() == 1 { "" } else { "s" };
    eprintln!(
        "heapsample: {} dump{plural} in {}\n  heapdiff {}\n  heapdiff serve {}",
        new.len(),
        dir.display(),
        dir.join(main).display(),
        dir.display()
    );
}

/// While the command runs, this process ignores the terminal's interrupt
/// and quit (they reach the command, which decides) and passes a
/// termination request on to it.
fn install_signal_forwarding() {
    extern "C" fn ignore(_: libc::c_int) {}
    extern "C" fn forward(signal: libc::c_int) {
        let child = CHILD.load(Ordering::Relaxed);
        if child > 0 {
            // SAFETY: kill is async-signal-safe.
            unsafe { libc::kill(child, signal) };
        }
    }
    for (signal, handler) in [
        (libc::SIGINT, ignore as extern "C" fn(libc::c_int)),
        (libc::SIGQUIT, ignore),
        (libc::SIGTERM, forward),
        (libc::SIGHUP, forward),
    ] {
        // SAFETY: installing a handler that only calls kill (or nothing);
        // handlers are reset to the default in the command by exec.
        unsafe { libc::signal(signal, handler as libc::sighandler_t) };
    }
}

/// End this process by `signal`, as the command ended, so that a shell
/// sees the same status (without a core file of this command).
fn die_by(signal: i32) {
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: lowering our own core limit, restoring the default action
    // and raising the signal.
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}
