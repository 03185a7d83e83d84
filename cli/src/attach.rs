//! `heapsample attach PID`: load the profiler into a running process and
//! start sampling now.
//!
//! The options are checked here first (the recorder's own rules), then one
//! thread of the process, stopped at a safe point (`inject`), loads the
//! library with the C library's `dlopen` (the library stays inert) and
//! calls its `heapsample_attach`, which takes over the malloc family. A
//! process the library is loaded in already, but detached from, is simply
//! attached again.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;

use crate::Failure;
use crate::control::{self, Mode};
use crate::inject::{self, Target};
use crate::options::{self, ProfileOptions};
use crate::output_dir;

#[derive(Args)]
pub struct AttachArgs {
    /// The process to attach to.
    pid: i32,
    #[command(flatten)]
    options: ProfileOptions,
    /// Seconds to wait for a thread of the process to reach a safe point.
    #[arg(long, default_value = "5", value_name = "SECONDS")]
    timeout: f64,
}

const RTLD_NOW: u64 = 2;
const RTLD_NODELETE: u64 = 0x1000;

pub fn attach(library: Option<PathBuf>, args: AttachArgs) -> Result<u8, Failure> {
    let library = crate::library::locate(library)?;
    let timeout = Duration::from_secs_f64(args.timeout.max(0.0));
    let mut dir = args.options.output_dir()?;
    let mut items = args.options.items()?;
    heapsample_options::attach::check_options(&options::join(&items)).map_err(Failure::new)?;
    let started = Instant::now();
    // A JVM's methods named in the dumps to come (asked again at each
    // `dump` and at `detach`).
    crate::runtime_names::refresh_jvm_perf_map(args.pid);
    let mut target = Target::inspect(args.pid)?;
    let loaded = target.profiler().is_some();
    // Its dumps' directory is then one inside the container (`container`).
    let in_container = !crate::container::shares_our_files(target.process);
    let mut again = false;
    if loaded {
        let status = control::status_of(&mut target, timeout)?;
        if status.mode == Mode::Detached {
            // The profiler keeps the options of the first attach: without
            // options of its own, this attach takes them (and their
            // directory); with others, it is refused here, saying which.
            let first_dir = first_directory(&status.text).filter(|_| !in_container);
            if args.options.is_empty() {
                items.clear();
                dir = first_dir.unwrap_or(dir);
                again = true;
            } else if let Some(first) = first_dir.filter(|first| *first != dir) {
                return Err(Failure::new(format!(
                    "process {} ({}) was attached before with its dumps in {}: the profiler \
                     keeps the options of its first attach, so attach again without options \
                     (or with `-o {}` and the first attach's options); nothing was changed",
                    args.pid,
                    target.name,
                    first.display(),
                    first.display()
                )));
            }
        }
        match status.mode {
            Mode::Preloaded => {
                return Err(Failure::new(format!(
                    "process {} ({}) is profiled already: it started with the profiler preloaded; \
                     see `heapsample status {}`",
                    args.pid, target.name, args.pid
                )));
            }
            Mode::Attached => {
                return Err(Failure::new(format!(
                    "process {} ({}) is attached already; see `heapsample status {}`",
                    args.pid, target.name, args.pid
                )));
            }
            Mode::Loaded | Mode::Detached => {}
        }
    }
    let from_memory = !loaded && !target.sees(&library);
    // A process in a container writes its dumps inside it; they are
    // brought to `dir` at each dump and at detach.
    let outpost = if in_container {
        options::ensure_directory(&dir)?;
        Some(crate::container::prepare(target.process, &dir)?)
    } else {
        if !again {
            output_dir::prepare(&dir, target.process, &target.name)?;
        }
        None
    };
    if let (Some(outpost), Some(prefix)) = (&outpost, items.last_mut()) {
        // `items` ends with the prefix of the host's directory.
        *prefix = format!("prof_prefix:{}", outpost.prefix());
    }
    let options = options::join(&items);
    let library_path = library.to_string_lossy().into_owned();
    let ((status, message), stopped_for, thread) =
        inject::with_session(&mut target, timeout, |session, target| {
            if !loaded {
                let handle = if from_memory {
                    load_from_memory(session, target, &library)?
                } else {
                    let path = session.put_string(&library_path)?;
                    session.call_libc(target, "dlopen", &[path, RTLD_NOW | RTLD_NODELETE])?
                };
                if handle == 0 {
                    let error = session.call_libc(target, "dlerror", &[])?;
                    let why = match error {
                        0 => "no reason given".to_string(),
                        at => session.read_string(at, 1024)?,
                    };
                    return Err(Failure::new(format!(
                        "process {} could not load the profiler: {why}; nothing was changed",
                        target.process.0
                    )));
                }
                target.refresh()?;
            }
            let entry = target.profiler_entry("heapsample_attach")?;
            let options = session.put_string(&options)?;
            let message = session.buffer(4096)?;
            let status = session.call(entry, &[options, message, 4096])?;
            Ok((status as i32, session.read_string(message, 4096)?))
        })?;
    if status != 0 {
        if let Some(outpost) = &outpost {
            outpost.remove(target.process);
        }
        return Err(Failure::new(format!(
            "process {} refused the attach: {message} (the library stays loaded and inert)",
            args.pid
        )));
    }
    let slots = message.split(';').next().unwrap_or(&message);
    println!(
        "heapsample: attached to process {} in {:.1} ms; thread {thread} was stopped {:.1} ms; {slots}",
        target.process.describe(&target.name),
        started.elapsed().as_secs_f64() * 1e3,
        stopped_for.as_secs_f64() * 1e3,
    );
    if let Some(outpost) = &outpost {
        println!(
            "  the process is in a container: it writes its dumps in {} there; \
             `heapsample dump` and `detach` bring them here",
            outpost.inside.display()
        );
    }
    println!(
        "  dumps go to {}/{}.{}.*.prof; in-use counts what was allocated since now\n  \
         heapsample dump {}     write a dump now\n  heapsample detach {}   stop and give the calls back",
        dir.display(),
        options::DUMP_BASE,
        args.pid,
        args.pid,
        args.pid
    );
    Ok(0)
}

const MFD_CLOEXEC: u64 = 1;
const MFD_ALLOW_SEALING: u64 = 2;
const F_ADD_SEALS: u64 = 1033;
/// No more seals, no shrinking, no growing, no writing: the file the
/// process maps is the library as written, whoever else holds it.
const ALL_SEALS: u64 = 1 | 2 | 4 | 8;

/// Load `library` into a process that cannot see it at its path (another
/// mount namespace: a container): into a sealed in-memory file made in the
/// process (`memfd_create`), written from here through `/proc/PID/fd/N`,
/// opened by the process as `/proc/self/fd/N`, and closed once loaded (no
/// descriptor is left behind; the mapping keeps the file). The `dlopen`
/// handle, or 0 (then `dlerror` says why).
fn load_from_memory(
    session: &mut inject::Session,
    target: &Target,
    library: &std::path::Path,
) -> Result<u64, Failure> {
    let pid = target.process.0;
    let bytes = std::fs::read(library)
        .map_err(|e| Failure::new(format!("cannot read {}: {e}", library.display())))?;
    let name = session.put_string(crate::library::MEMFD_NAME)?;
    let fd = session.call_libc(
        target,
        "memfd_create",
        &[name, MFD_CLOEXEC | MFD_ALLOW_SEALING],
    )? as i64 as i32;
    if fd < 0 {
        return Err(Failure::new(format!(
            "process {pid} cannot see {} (another mount namespace) and cannot make an in-memory \
             file (memfd_create failed: a seccomp filter?): allow memfd_create, or make the \
             library available inside it and name it with --library; nothing was changed",
            library.display()
        )));
    }
    let written = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/{pid}/fd/{fd}"))
        .and_then(|mut file| std::io::Write::write_all(&mut file, &bytes));
    let handle = match written {
        Ok(()) => {
            session.call_libc(target, "fcntl", &[fd as u64, F_ADD_SEALS, ALL_SEALS])?;
            let path = session.put_string(&format!("/proc/self/fd/{fd}"))?;
            session.call_libc(target, "dlopen", &[path, RTLD_NOW | RTLD_NODELETE])?
        }
        Err(_) => 0,
    };
    session.call_libc(target, "close", &[fd as u64])?;
    if let Err(error) = written {
        return Err(Failure::new(format!(
            "cannot write the profiler into process {pid}'s in-memory file: {error}; nothing was changed"
        )));
    }
    Ok(handle)
}

/// The directory of the first attach's dumps, from the status text's
/// options (`prof_prefix:DIR/heapsample`).
fn first_directory(status: &str) -> Option<PathBuf> {
    let options = status.lines().find_map(|l| l.strip_prefix("options: "))?;
    let prefix = options
        .split(',')
        .find_map(|item| item.strip_prefix("prof_prefix:"))?;
    Some(PathBuf::from(prefix).parent()?.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_directory_comes_from_the_status() {
        let status =
            "mode: detached\noptions: prof:true,prof_prefix:/tmp/a b/heapsample,prof_bt_max:128\n";
        assert_eq!(first_directory(status), Some(PathBuf::from("/tmp/a b")));
        assert_eq!(first_directory("mode: detached\n"), None);
    }
}
