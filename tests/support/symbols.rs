//! A program's functions from its symbol table (`nm`), to map the return
//! addresses of a dump to the program's functions, and small ELF facts
//! (PIE or not, build id).

use crate::programs::Program;
use heapsample_format::{Dump, Stack};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One function of a program: `[start, end)` in the file's address space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Symbol name as in the symbol table (not demangled).
    pub name: String,
}

/// The functions of one executable (from `nm -S --defined-only`), to map
/// return addresses in a dump to the program's functions.
#[derive(Clone, Debug)]
pub struct Symbols {
    /// The executable.
    pub path: PathBuf,
    /// True if it is a PIE (ELF type `ET_DYN`).
    pub pie: bool,
    /// Its text symbols, sorted by start address.
    pub functions: Vec<Function>,
}

impl Symbols {
    /// Read the symbols of `path` with `nm`.
    pub fn load(path: &Path) -> Symbols {
        let out = Command::new("nm")
            .args(["-S", "--defined-only", "--no-demangle"])
            .arg(path)
            .output()
            .unwrap_or_else(|e| panic!("cannot run nm: {e}"));
        assert!(
            out.status.success(),
            "nm {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut functions = Vec::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() != 4 {
                continue; // no size
            }
            if !matches!(fields[2], "t" | "T" | "w" | "W") {
                continue;
            }
            let (Ok(start), Ok(size)) = (
                u64::from_str_radix(fields[0], 16),
                u64::from_str_radix(fields[1], 16),
            ) else {
                continue;
            };
            if size == 0 {
                continue;
            }
            functions.push(Function {
                start,
                end: start + size,
                name: fields[3].to_string(),
            });
        }
        functions.sort_by_key(|f| f.start);
        Symbols {
            path: path.to_path_buf(),
            pie: elf_is_pie(path),
            functions,
        }
    }

    /// Symbols of a built [`Program`].
    pub fn of(program: &Program) -> Symbols {
        Symbols::load(&program.path)
    }

    /// The function containing a file address.
    pub fn function_containing(&self, file_address: u64) -> Option<&str> {
        let idx = self.functions.partition_point(|f| f.start <= file_address);
        let f = self.functions.get(idx.checked_sub(1)?)?;
        (file_address < f.end).then_some(f.name.as_str())
    }

    /// The file address of function `name`.
    pub fn address_of(&self, name: &str) -> Option<u64> {
        self.functions
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.start)
    }

    /// True if `module_path` names this executable (same file).
    pub fn is_this_file(&self, module_path: &str) -> bool {
        same_file(Path::new(module_path), &self.path)
    }

    /// Translate a runtime address captured in `epoch` into this program's
    /// file address: through the dump's module map (the module must be this
    /// file; its load bias is subtracted); if no module holds the address and
    /// the program is not a PIE, the address is already absolute. `None` if
    /// the address is in another object.
    pub fn file_address(&self, dump: &Dump, epoch: u32, address: u64) -> Option<u64> {
        match dump.module_for(address, epoch) {
            Some(m) if self.is_this_file(&m.path) || m.path.is_empty() => {
                Some(address.wrapping_sub(m.load_bias))
            }
            Some(_) => None,
            None if !self.pie => Some(address),
            None => None,
        }
    }

    /// The program function a return address in `stack` points into. Return
    /// addresses point after the call instruction, so `address - 1` is looked
    /// up (the call itself may be a function's last instruction).
    pub fn function_at(&self, dump: &Dump, stack: &Stack, return_address: u64) -> Option<&str> {
        let file_address = self.file_address(dump, stack.epoch, return_address)?;
        self.function_containing(file_address.wrapping_sub(1))
    }

    /// The innermost frame of `stack` that is in this program, as a function
    /// name (frames in libc, libstdc++ ... are skipped).
    pub fn innermost_function(&self, dump: &Dump, stack: &Stack) -> Option<&str> {
        stack
            .frames
            .iter()
            .find_map(|&a| self.function_at(dump, stack, a))
    }

    /// Every frame of `stack` symbolized in this program (`None` for frames
    /// elsewhere), innermost first.
    pub fn frame_functions(&self, dump: &Dump, stack: &Stack) -> Vec<Option<String>> {
        stack
            .frames
            .iter()
            .map(|&a| self.function_at(dump, stack, a).map(str::to_string))
            .collect()
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// True if the ELF file at `path` is `ET_DYN` (a PIE or a shared object).
pub fn elf_is_pie(path: &Path) -> bool {
    let bytes = std::fs::read(path).unwrap_or_default();
    bytes.len() > 18 && &bytes[..4] == b"\x7fELF" && u16::from_le_bytes([bytes[16], bytes[17]]) == 3
}

/// The GNU build-id of an ELF file (via `readelf -n`), if it has one.
pub fn build_id(path: &Path) -> Option<Vec<u8>> {
    let out = Command::new("readelf").arg("-n").arg(path).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let hex = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID:"))?
        .trim()
        .to_string();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}
