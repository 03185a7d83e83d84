//! The profiler's only voice: one line on stderr starting `<heapsample>:`.
//!
//! Each kind of failure is reported once per process, so a full disk or an
//! unwritable directory does not flood the program's stderr. Messages are
//! formatted into a fixed stack buffer and written with one `write(2)`: no
//! allocation, no stdio lock, so usable from any context, a signal handler
//! included (`fstat` and `write` are async-signal-safe), as long as the
//! message's arguments format without allocating (strings and numbers do;
//! an `io::Error` does not).
//!
//! Descriptor 2 is written only while it is still the file it was when the
//! profiler started: a program that closed stderr and reused descriptor 2 for
//! its own data must never find our words in it. Profiling may go quiet; the
//! program's files may not change.

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Kinds of trouble; each is reported at most once.
#[derive(Clone, Copy)]
#[repr(u32)]
pub enum Kind {
    /// Something in PROF_CONF (every bad item is reported, not only the first).
    Config = 0,
    /// A dump could not be written: the directory is missing or not one.
    DumpNoDirectory = 1,
    /// A dump could not be written: permission denied or read-only.
    DumpNotWritable = 2,
    /// A dump could not be written: the disk or quota is full.
    DumpDiskFull = 3,
    /// A dump could not be written: the name is too long.
    DumpNameTooLong = 4,
    /// A dump could not be written for another reason.
    DumpOther = 5,
    /// A dump could not be renamed into place.
    DumpRename = 6,
    /// A table filled up; samples are being dropped.
    TableFull = 7,
    /// The dump signal is not ours (already handled, or taken later).
    Signal = 8,
    /// The stack table filled up; new stacks are counted without frames.
    StacksWithoutFrames = 9,
    /// The dumps that must be kept pass `prof_dump_limit` or `prof_dump_bytes`.
    DumpSeries = 10,
    /// Anything else, reported every time.
    Other = 31,
}

static REPORTED: AtomicU32 = AtomicU32::new(0);

impl Kind {
    /// The kind of a failed dump write, from its errno.
    pub fn of_dump_error(errno: i32) -> Kind {
        match errno {
            libc::ENOENT | libc::ENOTDIR => Kind::DumpNoDirectory,
            libc::EACCES | libc::EPERM | libc::EROFS => Kind::DumpNotWritable,
            libc::ENOSPC | libc::EDQUOT | libc::EFBIG => Kind::DumpDiskFull,
            libc::ENAMETOOLONG => Kind::DumpNameTooLong,
            _ => Kind::DumpOther,
        }
    }
}

/// Device and inode of descriptor 2 at start-up; 0/0 when it was closed.
static STDERR_DEVICE: AtomicU64 = AtomicU64::new(0);
static STDERR_INODE: AtomicU64 = AtomicU64::new(0);

fn identify_stderr() -> Option<(u64, u64)> {
    // SAFETY: fstat with a valid out pointer; fd 2 may be closed (error).
    unsafe {
        let mut status: libc::stat = core::mem::zeroed();
        (crate::syscalls::fstat(2, &mut status) == 0).then_some((status.st_dev, status.st_ino))
    }
}

/// Remember what descriptor 2 is (call once at start-up).
pub fn remember_stderr() {
    if let Some((device, inode)) = identify_stderr() {
        STDERR_DEVICE.store(device, Ordering::Relaxed);
        STDERR_INODE.store(inode, Ordering::Relaxed);
    }
}

/// True while descriptor 2 is the stderr the program started with.
fn stderr_is_ours() -> bool {
    let remembered = (
        STDERR_DEVICE.load(Ordering::Relaxed),
        STDERR_INODE.load(Ordering::Relaxed),
    );
    remembered != (0, 0) && identify_stderr() == Some(remembered)
}

/// One output line, built without allocating.
struct LineBuffer {
    bytes: [u8; 512],
    len: usize,
}

impl Write for LineBuffer {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // Control characters are escaped: the message is one line, whatever
        // it quotes (a path with a newline must not forge a second line).
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for &byte in s.as_bytes() {
            let escaped;
            let piece: &[u8] = if byte < 0x20 || byte == 0x7f {
                escaped = [
                    b'\\',
                    b'x',
                    HEX[usize::from(byte >> 4)],
                    HEX[usize::from(byte & 15)],
                ];
                &escaped
            } else {
                core::slice::from_ref(&byte)
            };
            let room = self.bytes.len() - 1 - self.len; // keep space for '\n'
            if piece.len() > room {
                break;
            }
            self.bytes[self.len..self.len + piece.len()].copy_from_slice(piece);
            self.len += piece.len();
        }
        Ok(())
    }
}

/// Print `<heapsample>: <message>` unless this kind was reported before.
pub fn warn(kind: Kind, message: fmt::Arguments<'_>) {
    if !matches!(kind, Kind::Config | Kind::Other) {
        let bit = 1u32 << (kind as u32);
        if REPORTED.fetch_or(bit, Ordering::Relaxed) & bit != 0 {
            return;
        }
    }
    say(message);
}

/// Print `<heapsample>: <message>` unconditionally (leak summary and the
/// like), if descriptor 2 is still the program's stderr.
pub fn say(message: fmt::Arguments<'_>) {
    if !stderr_is_ours() {
        return;
    }
    let mut line = LineBuffer {
        bytes: [0; 512],
        len: 0,
    };
    let _ = line.write_str("<heapsample>: ");
    let _ = line.write_fmt(message);
    line.bytes[line.len] = b'\n';
    line.len += 1;
    let _errno = crate::sys::ErrnoGuard::save();
    // SAFETY: writes an initialised buffer to fd 2; errors are ignored on
    // purpose (a closed stderr must not disturb the program).
    unsafe { libc::write(2, line.bytes.as_ptr().cast(), line.len) };
}

/// `warn!(Kind::X, "fmt", args...)`.
#[macro_export]
macro_rules! warn {
    ($kind:expr, $($arg:tt)*) => {
        $crate::warn::warn($kind, format_args!($($arg)*))
    };
}
