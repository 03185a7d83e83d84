//! The jitdump format (`jit-PID.dump`, perf's tools/perf/util/jitdump.h),
//! which Node.js writes with `--perf-prof` and the JVM through an agent: a
//! header, then records; a `JIT_CODE_LOAD` names the code it loaded at an
//! address, a `JIT_CODE_MOVE` moves it. The runtime maps the file into
//! itself so that perf finds it: [`find`] looks for that mapping.
//!
//! Owns reading the format into the code regions it names, in file order
//! (a later record wins where two overlap). Never runs inside malloc: it is
//! called while a dump is assembled, and reads `/proc/self/maps`.

/// The header's magic number as written on a machine of the reader's byte
/// order (`JiTD`).
const MAGIC: u32 = 0x4A69_5444;
const HEADER_MIN: usize = 40;
const RECORD_HEADER: usize = 16;
const JIT_CODE_LOAD: u32 = 0;
const JIT_CODE_MOVE: u32 = 1;

/// A region of code a jitdump names, in record order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub start: u64,
    pub size: u64,
    pub name: String,
}

/// The jitdump the process `pid` maps (`…/jit-PID.dump`), if any.
pub fn find(pid: u32) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let wanted = format!("/jit-{pid}.dump");
    // One pass over the text first (a vectorized search): the line-by-line
    // walk only where the name is there at all.
    if !maps.contains(&wanted) {
        return None;
    }
    maps.lines()
        .filter_map(|line| line.find('/').map(|at| &line[at..]))
        .find(|path| path.ends_with(&wanted))
        .map(str::to_string)
}

/// The regions a jitdump's bytes name; a truncated last record (one being
/// written) and records of other kinds are skipped; a file that is not a
/// jitdump gives none.
pub fn parse(bytes: &[u8]) -> Vec<Region> {
    let Some(magic) = bytes.get(..4) else {
        return Vec::new();
    };
    let swapped = match u32::from_ne_bytes([magic[0], magic[1], magic[2], magic[3]]) {
        MAGIC => false,
        other if other.swap_bytes() == MAGIC => true,
        _ => return Vec::new(),
    };
    let reader = Reader { bytes, swapped };
    let Some(header_size) = reader.u32(8) else {
        return Vec::new();
    };
    let mut at = (header_size as usize).max(HEADER_MIN);
    let mut regions: Vec<Region> = Vec::new();
    while let (Some(id), Some(size)) = (reader.u32(at), reader.u32(at + 4)) {
        let size = size as usize;
        let Some(record) = bytes.get(at..at.saturating_add(size)) else {
            break;
        };
        if size < RECORD_HEADER {
            break;
        }
        let body = Reader {
            bytes: record,
            swapped,
        };
        match id {
            JIT_CODE_LOAD => regions.extend(load(&body)),
            JIT_CODE_MOVE => regions.extend(moved(&body, &regions)),
            _ => {}
        }
        at += size;
    }
    regions
}

/// A `JIT_CODE_LOAD`: pid, tid, vma, code address, size, index, name.
fn load(record: &Reader<'_>) -> Option<Region> {
    let body = RECORD_HEADER;
    let start = record.u64(body + 16)?;
    let size = record.u64(body + 24)?;
    let name_at = body + 40;
    let rest = record.bytes.get(name_at..)?;
    let end = rest.iter().position(|&byte| byte == 0)?;
    let name = String::from_utf8_lossy(&rest[..end]).into_owned();
    (size > 0 && !name.is_empty()).then_some(Region { start, size, name })
}

/// A `JIT_CODE_MOVE`: the latest region at the old address, now at the new.
fn moved(record: &Reader<'_>, regions: &[Region]) -> Option<Region> {
    let body = RECORD_HEADER;
    let old = record.u64(body + 16)?;
    let new = record.u64(body + 24)?;
    let size = record.u64(body + 32)?;
    let name = regions.iter().rev().find(|r| r.start == old)?.name.clone();
    (size > 0).then_some(Region {
        start: new,
        size,
        name,
    })
}

/// Integers of a jitdump, in the writer's byte order.
struct Reader<'a> {
    bytes: &'a [u8],
    swapped: bool,
}

impl Reader<'_> {
    fn u32(&self, at: usize) -> Option<u32> {
        let bytes = self.bytes.get(at..at.checked_add(4)?)?;
        let value = u32::from_ne_bytes(bytes.try_into().ok()?);
        Some(if self.swapped {
            value.swap_bytes()
        } else {
            value
        })
    }

    fn u64(&self, at: usize) -> Option<u64> {
        let bytes = self.bytes.get(at..at.checked_add(8)?)?;
        let value = u64::from_ne_bytes(bytes.try_into().ok()?);
        Some(if self.swapped {
            value.swap_bytes()
        } else {
            value
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A jitdump in the documented layout, in `swap`ped byte order or not.
    fn file(records: &[Vec<u8>], swap: bool) -> Vec<u8> {
        let u32b = |v: u32| if swap { v.swap_bytes() } else { v }.to_ne_bytes();
        let u64b = |v: u64| if swap { v.swap_bytes() } else { v }.to_ne_bytes();
        let mut out = Vec::new();
        out.extend(u32b(MAGIC));
        out.extend(u32b(1)); // version
        out.extend(u32b(40)); // header size
        out.extend(u32b(62)); // EM_X86_64
        out.extend(u32b(0)); // pad
        out.extend(u32b(1234)); // pid
        out.extend(u64b(5)); // timestamp
        out.extend(u64b(0)); // flags
        for record in records {
            out.extend(record);
        }
        out
    }

    fn load_record(start: u64, size: u64, name: &str, swap: bool) -> Vec<u8> {
        let u32b = |v: u32| if swap { v.swap_bytes() } else { v }.to_ne_bytes();
        let u64b = |v: u64| if swap { v.swap_bytes() } else { v }.to_ne_bytes();
        let mut body = Vec::new();
        body.extend(u32b(1234)); // pid
        body.extend(u32b(1235)); // tid
        body.extend(u64b(start)); // vma
        body.extend(u64b(start)); // code address
        body.extend(u64b(size));
        body.extend(u64b(7)); // code index
        body.extend(name.as_bytes());
        body.push(0);
        body.extend(vec![0xcc; size as usize]); // the code
        let mut record = Vec::new();
        record.extend(u32b(JIT_CODE_LOAD));
        record.extend(u32b((RECORD_HEADER + body.len()) as u32));
        record.extend(u64b(9)); // timestamp
        record.extend(body);
        record
    }

    fn move_record(old: u64, new: u64, size: u64) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend(1234u32.to_ne_bytes());
        body.extend(1235u32.to_ne_bytes());
        body.extend(new.to_ne_bytes()); // vma
        body.extend(old.to_ne_bytes());
        body.extend(new.to_ne_bytes());
        body.extend(size.to_ne_bytes());
        body.extend(7u64.to_ne_bytes());
        let mut record = Vec::new();
        record.extend(JIT_CODE_MOVE.to_ne_bytes());
        record.extend(((RECORD_HEADER + body.len()) as u32).to_ne_bytes());
        record.extend(10u64.to_ne_bytes());
        record.extend(body);
        record
    }

    fn region(start: u64, size: u64, name: &str) -> Region {
        Region {
            start,
            size,
            name: name.to_string(),
        }
    }

    #[test]
    fn loads_and_moves_are_read_in_order() {
        let mut bytes = file(
            &[
                load_record(0x1000, 0x40, "JS:*handleRequest /tmp/leak.js:6:23", false),
                move_record(0x1000, 0x3000, 0x40),
                load_record(0x1000, 0x20, "JS:^makeBuffer /tmp/leak.js:3:20", false),
            ],
            false,
        );
        let expected = vec![
            region(0x1000, 0x40, "JS:*handleRequest /tmp/leak.js:6:23"),
            region(0x3000, 0x40, "JS:*handleRequest /tmp/leak.js:6:23"),
            region(0x1000, 0x20, "JS:^makeBuffer /tmp/leak.js:3:20"),
        ];
        assert_eq!(parse(&bytes), expected);
        // A record being written (cut short) is left out.
        bytes.extend(&load_record(0x5000, 0x10, "JS:~late /tmp/x.js:1", false)[..30]);
        assert_eq!(parse(&bytes), expected);
    }

    #[test]
    fn the_other_byte_order_and_foreign_files() {
        let bytes = file(&[load_record(0x2000, 8, "Interpreter", true)], true);
        assert_eq!(parse(&bytes), vec![region(0x2000, 8, "Interpreter")]);
        assert!(parse(b"").is_empty());
        assert!(parse(b"7f00 10 not a jitdump\n").is_empty());
        let mut zero_sized = file(&[], false);
        zero_sized.extend([0u8; 16]);
        assert!(parse(&zero_sized).is_empty());
    }
}
