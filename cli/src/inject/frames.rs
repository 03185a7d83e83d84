//! The call chain of a stopped thread, unwound from its registers with the
//! call-frame information (`.eh_frame`, found through `.eh_frame_hdr`) of
//! the objects its code lies in, read from their files (through the
//! process's view of the file system, the inode checked) or, for the
//! vDSO, from its memory. It answers one question: which signal handlers
//! run on the thread, and where did each interrupt it? A handler runs
//! when the C library's signal return trampoline is a return address of
//! the live chain (the kernel pushes its address under every handler's
//! frame); the signal frame above it holds the interrupted registers, and
//! the walk goes on from them.
//!
//! Only the chain counts: copies of the trampoline's address left higher
//! on the stack by handlers that returned long ago are never looked at.
//! When the chain cannot be followed to its end (code without CFI, such as
//! a JIT's, or a rule this walk does not evaluate), the answer is
//! "unknown", and the caller decides (see `safepoint`).
//!
//! Owns nothing beyond a cache of the objects it parsed; never stops,
//! writes to or resumes the thread.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, LittleEndian, Register, RegisterRule,
    UnwindContext, UnwindSection,
};
use object::{Object, ObjectSection, ObjectSegment};

use super::proc::{Mapping, Process};
use super::tracer::Stopped;

/// What the walk found: the contexts signal handlers on the chain
/// interrupted (innermost first), and how the walk ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    pub interrupted: Vec<Interrupted>,
    pub end: End,
}

/// How the walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// At the chain's outermost frame.
    Complete,
    /// Before it (no CFI, or a rule this walk does not evaluate); the stack
    /// pointer of the last frame reached.
    Unknown { stack: u64 },
}

/// The registers a signal handler's frame saved: where the handler
/// interrupted the thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interrupted {
    pub rip: u64,
    pub rax: u64,
    pub rdi: u64,
}

/// Where the saved registers lie above the stack pointer the trampoline
/// runs with (`struct rt_sigframe` after its return address: `ucontext`,
/// whose `uc_mcontext` starts 40 bytes in, registers r8..r15, rdi, rsi,
/// rbp, rbx, rdx, rax, rcx, rsp, rip).
const SAVED: u64 = 40;
const SAVED_RDI: u64 = SAVED + 8 * 8;
const SAVED_RBP: u64 = SAVED + 10 * 8;
const SAVED_RAX: u64 = SAVED + 13 * 8;
const SAVED_RSP: u64 = SAVED + 15 * 8;
const SAVED_RIP: u64 = SAVED + 16 * 8;

/// Frames walked at most (a longer chain ends the walk as unknown).
const MAX_FRAMES: usize = 512;

// The x86-64 DWARF register numbers.
const RBP: u16 = 6;
const RSP: u16 = 7;
const RA: u16 = 16;

/// An object's bytes: its file, mapped, or the vDSO, copied.
enum Bytes {
    Mapped(memmap2::Mmap),
    Copied(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(map) => map,
            Bytes::Copied(bytes) => bytes,
        }
    }
}

/// One object's unwind tables, placed where the process loaded it.
struct Module {
    data: Bytes,
    /// What its file addresses must be moved by.
    bias: u64,
    eh_frame: Option<(usize, usize, u64)>,
    eh_frame_hdr: Option<(usize, usize, u64)>,
}

impl Module {
    fn parse(data: Bytes, mapped_at: u64) -> Option<Module> {
        let file = object::File::parse(&*data).ok()?;
        let first_load = file.segments().map(|s| s.address()).min().unwrap_or(0) & !0xfff;
        let range = |name: &str| {
            let section = file.section_by_name(name)?;
            let (offset, size) = section.file_range()?;
            Some((offset as usize, size as usize, section.address()))
        };
        let (eh_frame, eh_frame_hdr) = (range(".eh_frame"), range(".eh_frame_hdr"));
        Some(Module {
            bias: mapped_at.wrapping_sub(first_load),
            eh_frame,
            eh_frame_hdr,
            data,
        })
    }

    fn slice(&self, range: (usize, usize, u64)) -> Option<&[u8]> {
        self.data.get(range.0..range.0.checked_add(range.1)?)
    }

    /// The CFA rule and the rules of rbp and the return address at
    /// `address` (a run-time address).
    fn rules(&self, address: u64) -> Option<Rules> {
        let eh_frame_range = self.eh_frame?;
        let eh_frame = EhFrame::new(self.slice(eh_frame_range)?, LittleEndian);
        let mut bases = BaseAddresses::default().set_eh_frame(eh_frame_range.2);
        let file_address = address.wrapping_sub(self.bias);
        let mut context = UnwindContext::new();
        let row = match self.eh_frame_hdr {
            Some(hdr_range) => {
                bases = bases.set_eh_frame_hdr(hdr_range.2);
                let hdr = EhFrameHdr::new(self.slice(hdr_range)?, LittleEndian)
                    .parse(&bases, 8)
                    .ok()?;
                match hdr.table() {
                    Some(table) => table.unwind_info_for_address(
                        &eh_frame,
                        &bases,
                        &mut context,
                        file_address,
                        EhFrame::cie_from_offset,
                    ),
                    None => eh_frame.unwind_info_for_address(
                        &bases,
                        &mut context,
                        file_address,
                        EhFrame::cie_from_offset,
                    ),
                }
            }
            None => eh_frame.unwind_info_for_address(
                &bases,
                &mut context,
                file_address,
                EhFrame::cie_from_offset,
            ),
        }
        .ok()?;
        let CfaRule::RegisterAndOffset { register, offset } = *row.cfa() else {
            return None;
        };
        Some(Rules {
            cfa_register: register.0,
            cfa_offset: offset,
            rbp: simple(row.register(Register(RBP)))?,
            ra: simple(row.register(Register(RA)))?,
        })
    }
}

/// A register's rule, for the rules this walk evaluates.
#[derive(Clone, Copy, Debug)]
enum Rule {
    Undefined,
    Same,
    /// Saved at CFA + offset.
    At(i64),
}

fn simple<T: gimli::ReaderOffset>(rule: Option<RegisterRule<T>>) -> Option<Rule> {
    match rule {
        None | Some(RegisterRule::SameValue) => Some(Rule::Same),
        Some(RegisterRule::Undefined) => Some(Rule::Undefined),
        Some(RegisterRule::Offset(offset)) => Some(Rule::At(offset)),
        _ => None,
    }
}

struct Rules {
    cfa_register: u16,
    cfa_offset: i64,
    rbp: Rule,
    ra: Rule,
}

/// Walks the chains of one process's threads.
pub struct Walker {
    process: Process,
    maps: Vec<Mapping>,
    modules: RefCell<HashMap<u64, Option<Rc<Module>>>>,
}

impl Walker {
    pub fn new(process: Process, maps: &[Mapping]) -> Walker {
        Walker {
            process,
            maps: maps.to_vec(),
            modules: RefCell::new(HashMap::new()),
        }
    }

    /// The unwind tables of the object whose code holds `address`.
    fn module_at(&self, stopped: &Stopped, address: u64) -> Option<Rc<Module>> {
        let mapping = self
            .maps
            .iter()
            .find(|m| m.executable && m.contains(address))?;
        // The object's first mapping: the same file, or the vDSO itself.
        let first = if mapping.inode != 0 {
            self.maps
                .iter()
                .filter(|m| m.inode == mapping.inode && m.path == mapping.path)
                .min_by_key(|m| m.start)?
        } else {
            mapping
        };
        let mut cache = self.modules.borrow_mut();
        cache
            .entry(first.start)
            .or_insert_with(|| self.load(stopped, first, mapping).map(Rc::new))
            .clone()
    }

    fn load(&self, stopped: &Stopped, first: &Mapping, mapping: &Mapping) -> Option<Module> {
        let data = if mapping.path == "[vdso]" {
            Bytes::Copied(
                stopped
                    .read(mapping.start, (mapping.end - mapping.start) as usize)
                    .ok()?,
            )
        } else if mapping.inode != 0 && mapping.path.starts_with('/') {
            let path = self.process.root_path(std::path::Path::new(&mapping.path));
            let file = std::fs::File::open(path).ok()?;
            let metadata = file.metadata().ok()?;
            if std::os::unix::fs::MetadataExt::ino(&metadata) != mapping.inode {
                return None;
            }
            // SAFETY: a read-only private mapping of a program or library
            // file, which nothing is expected to truncate while it is read.
            Bytes::Mapped(unsafe { memmap2::Mmap::map(&file) }.ok()?)
        } else {
            return None;
        };
        Module::parse(data, first.start)
    }

    /// Walk the stopped thread's chain, through the signal frames of
    /// handlers (whose return address is `restorer`).
    pub fn chain(&self, stopped: &Stopped, restorer: u64) -> Chain {
        let registers = &stopped.registers;
        let (mut pc, mut rsp, mut rbp) = (registers.rip, registers.rsp, registers.rbp);
        let mut interrupted = Vec::new();
        // The first frame's address, and an interrupted context's, is the
        // instruction itself; a return address points after its call.
        let mut exact = true;
        let read = |address: u64| -> Option<u64> {
            let bytes = stopped.read(address, 8).ok()?;
            Some(u64::from_ne_bytes(bytes.as_slice().try_into().ok()?))
        };
        for _ in 0..MAX_FRAMES {
            let unknown = |rsp| Chain {
                interrupted: interrupted.clone(),
                end: End::Unknown { stack: rsp },
            };
            if pc == 0 {
                return complete(interrupted);
            }
            if pc == restorer {
                // The handler's frame is popped: rsp is the signal frame.
                let saved = |offset| read(rsp + offset);
                let (Some(rip), Some(rax), Some(rdi), Some(next_rsp), Some(next_rbp)) = (
                    saved(SAVED_RIP),
                    saved(SAVED_RAX),
                    saved(SAVED_RDI),
                    saved(SAVED_RSP),
                    saved(SAVED_RBP),
                ) else {
                    return unknown(rsp);
                };
                interrupted.push(Interrupted { rip, rax, rdi });
                (pc, rsp, rbp, exact) = (rip, next_rsp, next_rbp, true);
                continue;
            }
            let lookup = if exact { pc } else { pc - 1 };
            let Some(rules) = self
                .module_at(stopped, lookup)
                .and_then(|module| module.rules(lookup))
            else {
                return unknown(rsp);
            };
            let base = match rules.cfa_register {
                RSP => rsp,
                RBP => rbp,
                _ => return unknown(rsp),
            };
            let cfa = base.wrapping_add(rules.cfa_offset as u64);
            let next_pc = match rules.ra {
                Rule::Undefined => return complete(interrupted),
                Rule::Same => return unknown(rsp),
                Rule::At(offset) => match read(cfa.wrapping_add(offset as u64)) {
                    Some(value) => value,
                    None => return unknown(rsp),
                },
            };
            rbp = match rules.rbp {
                Rule::At(offset) => match read(cfa.wrapping_add(offset as u64)) {
                    Some(value) => value,
                    None => return unknown(rsp),
                },
                Rule::Same => rbp,
                Rule::Undefined => 0,
            };
            if cfa <= rsp && !exact {
                return unknown(rsp); // not moving outwards
            }
            (rsp, pc, exact) = (cfa, next_pc, false);
        }
        Chain {
            interrupted,
            end: End::Unknown { stack: rsp },
        }
    }
}

fn complete(interrupted: Vec<Interrupted>) -> Chain {
    Chain {
        interrupted,
        end: End::Complete,
    }
}
