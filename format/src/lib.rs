//! The heapsample dump format, shared by the shim (which writes it) and
//! `heapdiff` (which reads it).
//!
//! A dump file is a fixed 24-byte header followed by a bincode body:
//!
//! | offset | size | field                                   |
//! |--------|------|-----------------------------------------|
//! | 0      | 8    | magic `HEAPSMPL`                        |
//! | 8      | 4    | format version, little endian           |
//! | 12     | 4    | CRC-32 of the body, little endian       |
//! | 16     | 8    | body length in bytes, little endian     |
//! | 24     | n    | [`Dump`], bincode 2 "standard" encoding |
//!
//! The header lets a reader tell a foreign file, a newer version, a truncated
//! file and a corrupted body apart before decoding anything, and the body is
//! decoded with an allocation limit proportional to the file size, so a small
//! corrupt file can never make the reader allocate gigabytes.
//!
//! This crate holds plain data and codecs only: it exports no C symbols and
//! knows nothing about interposition.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Decode a string by borrowing it from the input first: the decoder then
/// checks its length against the bytes actually there, instead of
/// allocating whatever length the data claims.
fn owned_from_borrowed<'de, D: serde::Deserializer<'de>>(decoder: D) -> Result<String, D::Error> {
    let borrowed: &'de str = Deserialize::deserialize(decoder)?;
    Ok(borrowed.to_owned())
}

/// [`owned_from_borrowed`] for a list of strings.
fn owned_list_from_borrowed<'de, D: serde::Deserializer<'de>>(
    decoder: D,
) -> Result<Vec<String>, D::Error> {
    let borrowed: Vec<&'de str> = Deserialize::deserialize(decoder)?;
    Ok(borrowed.into_iter().map(str::to_owned).collect())
}

/// The first eight bytes of every dump.
pub const MAGIC: [u8; 8] = *b"HEAPSMPL";
/// The version written by this crate. Readers accept exactly this version.
pub const VERSION: u32 = 2;
/// Size of the fixed header in front of the body.
pub const HEADER_LEN: usize = 24;
/// The largest body a reader accepts (1 GiB): anything larger is not a dump
/// this project wrote.
pub const MAX_BODY_LEN: u64 = 1 << 30;

/// What made the shim write a dump. The letter is the one used in file names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Trigger {
    /// At exit (`prof_final`): `<prefix>.<pid>.<seq>.f.prof`.
    Final,
    /// Every 2^`lg_prof_interval` bytes allocated: `...i<iseq>.prof`.
    Interval,
    /// A new high-water mark of the live heap (`prof_gdump`): `...u<useq>.prof`.
    HighWater,
    /// `heapsample_dump()` called by the program: `...m<mseq>.prof`.
    Manual,
    /// The configured signal (`prof_signal`): `...s<sseq>.prof`.
    Signal,
}

impl Trigger {
    /// The letter used in automatic file names.
    pub fn letter(self) -> char {
        match self {
            Trigger::Final => 'f',
            Trigger::Interval => 'i',
            Trigger::HighWater => 'u',
            Trigger::Manual => 'm',
            Trigger::Signal => 's',
        }
    }
}

/// One loaded object (executable, shared library, vdso) as it was mapped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    /// Path of the file as the loader names it; the main executable's real path.
    #[serde(deserialize_with = "owned_from_borrowed")]
    pub path: String,
    /// The GNU build-id note, empty if the object has none.
    pub build_id: Vec<u8>,
    /// Load bias: the value to subtract from a runtime address to get the
    /// address in the file's own (ELF virtual address) space.
    pub load_bias: u64,
    /// Runtime address ranges `[start, end)` of its executable segments.
    pub ranges: Vec<(u64, u64)>,
    /// First module epoch in which the object was seen loaded.
    pub first_epoch: u32,
    /// Last epoch in which it was loaded; `None` while it is still loaded.
    pub last_epoch: Option<u32>,
}

impl Module {
    /// True if this module mapped `address` during `epoch`.
    pub fn contains(&self, address: u64, epoch: u32) -> bool {
        epoch >= self.first_epoch
            && self.last_epoch.is_none_or(|last| epoch <= last)
            && self
                .ranges
                .iter()
                .any(|&(start, end)| address >= start && address < end)
    }
}

/// A thread that took at least one sample.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadInfo {
    /// The shim's own serial number for the thread, 1 for the first one seen.
    pub serial: u32,
    /// The kernel thread id.
    pub tid: u32,
    /// The thread name when it was first seen (`/proc/.../comm`), maybe empty.
    #[serde(deserialize_with = "owned_from_borrowed")]
    pub name: String,
}

/// One distinct call stack of sampled allocations, with its raw counts.
///
/// Counts are what the sampler saw, not estimates: the reader corrects them
/// for sampling with [`unsample`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stack {
    /// Return addresses, innermost first; the first is the allocation call
    /// site's return address. The shim's own frames are not included.
    pub frames: Vec<u64>,
    /// The [`ThreadInfo::serial`] of the thread that allocated.
    pub thread: u32,
    /// The module epoch in which the stack was captured.
    pub epoch: u32,
    /// Sampled objects still live.
    pub live_objects: u64,
    /// Requested bytes of the sampled objects still live.
    pub live_bytes: u64,
    /// Usable bytes (as the allocator reports them) of those objects.
    pub live_usable_bytes: u64,
    /// Sampled objects ever allocated here (cumulative).
    pub alloc_objects: u64,
    /// Requested bytes of all sampled objects allocated here (cumulative).
    pub alloc_bytes: u64,
}

/// Exact process-wide counters kept beside the samples.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Calls that allocated (malloc, calloc, realloc, new, ...), all threads.
    /// While memory is exhausted, a small `malloc` that failed may be
    /// counted too (the fast path counts before forwarding).
    pub allocations: u64,
    /// Calls that released a non-null pointer, present under
    /// `prof_exact:true` (the default free path counts nothing, to stay one
    /// load and one branch).
    pub frees: Option<u64>,
    /// Bytes requested by all allocations.
    pub bytes_allocated: u64,
    /// Exact live heap in usable bytes, present under `prof_exact:true`.
    pub live_usable_bytes: Option<u64>,
    /// Allocations sampled since the start (or the last reset).
    pub samples_taken: u64,
    /// Samples that could not be recorded (a table was full).
    pub samples_dropped: u64,
    /// Sampled objects live at the time of the dump.
    pub samples_live: u64,
    /// Threads that ever allocated.
    pub threads_seen: u64,
    /// Bytes the profiler itself holds for its tables (its own overhead).
    pub profiler_bytes: u64,
}

/// A whole heap profile as written by the shim.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Dump {
    /// Version of the shim that wrote the dump.
    #[serde(deserialize_with = "owned_from_borrowed")]
    pub writer: String,
    /// Process id of the profiled process.
    pub pid: u32,
    /// Path of the main executable.
    #[serde(deserialize_with = "owned_from_borrowed")]
    pub executable: String,
    /// The command line, argument by argument.
    #[serde(deserialize_with = "owned_list_from_borrowed")]
    pub command_line: Vec<String>,
    /// Wall-clock time of the dump, nanoseconds since the Unix epoch.
    pub time_unix_ns: u64,
    /// Why the dump was written.
    pub trigger: Trigger,
    /// Sequence number of the dump among all dumps of the process.
    pub seq: u64,
    /// Sequence number among the dumps with the same trigger.
    pub trigger_seq: u64,
    /// log2 of the mean sampling period in bytes; 0 samples everything.
    pub lg_sample_period: u32,
    /// The effective configuration, as `key:value,...`.
    #[serde(deserialize_with = "owned_from_borrowed")]
    pub config: String,
    /// Every object loaded at any time the samples cover, with its epochs.
    pub modules: Vec<Module>,
    /// Threads that took samples.
    pub threads: Vec<ThreadInfo>,
    /// Distinct stacks with their sampled counts.
    pub stacks: Vec<Stack>,
    /// Exact counters.
    pub totals: Totals,
}

impl Dump {
    /// The mean sampling period in bytes.
    pub fn sample_period(&self) -> u64 {
        1u64 << self.lg_sample_period.min(62)
    }

    /// The module that held `address` when a stack of `epoch` was captured.
    pub fn module_for(&self, address: u64, epoch: u32) -> Option<&Module> {
        self.modules.iter().find(|m| m.contains(address, epoch))
    }
}

/// Scale factor that turns sampled counts into estimates of the true counts.
///
/// An allocation of `s` bytes is sampled with probability `1 - exp(-s/R)`
/// where `R` is the mean sampling period (the countdown is exponential). For
/// a stack with `n` sampled objects totalling `b` bytes, the average object
/// size is `b/n` and both counts scale by `1 / (1 - exp(-(b/n)/R))`, the
/// correction jeprof and pprof apply. With `R == 1` (every allocation
/// sampled) the factor is exactly 1.
pub fn unsample_scale(objects: u64, bytes: u64, period: u64) -> f64 {
    if objects == 0 {
        return 1.0;
    }
    let probability = sampling_probability(bytes as f64 / objects as f64, period);
    if probability <= 0.0 {
        return 1.0;
    }
    1.0 / probability
}

/// The probability that an allocation of `size` bytes is sampled with mean
/// period `period` bytes: `1 - exp(-size/period)` (the countdown is
/// exponential); 1 when every allocation is sampled (`period <= 1`). The
/// one place the sampling law is inverted, by the reader and by the
/// recorder's live-heap estimate alike.
pub fn sampling_probability(size: f64, period: u64) -> f64 {
    if period <= 1 {
        return 1.0;
    }
    -(-size / period as f64).exp_m1()
}

/// Estimated `(objects, bytes)` for sampled counts, see [`unsample_scale`].
pub fn unsample(objects: u64, bytes: u64, period: u64) -> (f64, f64) {
    let scale = unsample_scale(objects, bytes, period);
    (objects as f64 * scale, bytes as f64 * scale)
}

/// Why a file could not be read as a dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than the fixed header.
    TooShort { len: usize },
    /// The magic bytes are wrong: not a heapsample dump.
    Foreign,
    /// A version this reader does not know.
    UnsupportedVersion { found: u32 },
    /// The header claims an impossible body size.
    BodyTooLarge { claimed: u64 },
    /// Fewer body bytes than the header announces.
    Truncated { expected: u64, found: u64 },
    /// Bytes after the announced body.
    TrailingBytes { extra: u64 },
    /// The body's checksum does not match: the file was damaged.
    Checksum { expected: u32, found: u32 },
    /// The body passed the checksum but does not decode (a writer bug).
    Body(String),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::TooShort { len } if *len == 0 => write!(f, "empty file"),
            DecodeError::TooShort { len } => write!(
                f,
                "too short to be a heapsample dump ({len} bytes, the header alone is {HEADER_LEN})"
            ),
            DecodeError::Foreign => write!(f, "not a heapsample dump (wrong magic bytes)"),
            DecodeError::UnsupportedVersion { found } => write!(
                f,
                "dump format version {found} is not supported (this heapdiff reads version {VERSION})"
            ),
            DecodeError::BodyTooLarge { claimed } => {
                write!(f, "corrupt header: claims a body of {claimed} bytes")
            }
            DecodeError::Truncated { expected, found } => write!(
                f,
                "truncated: the header announces {expected} body bytes, the file has {found}"
            ),
            DecodeError::TrailingBytes { extra } => {
                write!(f, "corrupt: {extra} unexpected bytes after the body")
            }
            DecodeError::Checksum { expected, found } => write!(
                f,
                "corrupt: body checksum is {found:#010x}, the header says {expected:#010x}"
            ),
            DecodeError::Body(why) => write!(f, "corrupt body: {why}"),
        }
    }
}

impl std::error::Error for DecodeError {}

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// The most bytes decoding may claim for strings and byte buffers, which
/// bincode allocates at the length the data announces. Real dumps hold a few
/// hundred KiB of strings (paths, command line, thread names); the limit
/// turns a lying length into an error instead of a huge allocation.
const DECODE_CLAIM_LIMIT: usize = 64 << 20;

fn decode_config() -> bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Varint,
    bincode::config::Limit<DECODE_CLAIM_LIMIT>,
> {
    bincode::config::standard().with_limit::<DECODE_CLAIM_LIMIT>()
}

/// Serialize a dump into the complete file contents (header and body).
pub fn encode(dump: &Dump) -> Vec<u8> {
    let mut out = vec![0u8; HEADER_LEN];
    // Encoding plain data into a Vec cannot fail: no I/O, no unsupported types.
    let body = bincode::serde::encode_to_vec(dump, config()).unwrap_or_default();
    let crc = crc32fast::hash(&body);
    out[0..8].copy_from_slice(&MAGIC);
    out[8..12].copy_from_slice(&VERSION.to_le_bytes());
    out[12..16].copy_from_slice(&crc.to_le_bytes());
    out[16..24].copy_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

fn le_u32(bytes: &[u8]) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[..4]);
    u32::from_le_bytes(b)
}

fn le_u64(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(b)
}

/// Parse complete file contents. Never panics; every failure is a
/// [`DecodeError`] that says what is wrong.
pub fn decode(file: &[u8]) -> Result<Dump, DecodeError> {
    if file.len() < HEADER_LEN {
        if file.len() >= 8 && file[..8] != MAGIC {
            return Err(DecodeError::Foreign);
        }
        return Err(DecodeError::TooShort { len: file.len() });
    }
    if file[..8] != MAGIC {
        return Err(DecodeError::Foreign);
    }
    let version = le_u32(&file[8..12]);
    if version != VERSION {
        return Err(DecodeError::UnsupportedVersion { found: version });
    }
    let expected_crc = le_u32(&file[12..16]);
    let body_len = le_u64(&file[16..24]);
    if body_len > MAX_BODY_LEN {
        return Err(DecodeError::BodyTooLarge { claimed: body_len });
    }
    let body = &file[HEADER_LEN..];
    let found = body.len() as u64;
    if found < body_len {
        return Err(DecodeError::Truncated {
            expected: body_len,
            found,
        });
    }
    if found > body_len {
        return Err(DecodeError::TrailingBytes {
            extra: found - body_len,
        });
    }
    let crc = crc32fast::hash(body);
    if crc != expected_crc {
        return Err(DecodeError::Checksum {
            expected: expected_crc,
            found: crc,
        });
    }
    decode_body(body)
}

/// Decode a body. Memory stays proportional to the body's size: serde
/// preallocates at most 1 MiB per sequence whatever length the data claims,
/// every element consumes at least one input byte, so a lying length runs out
/// of input (an error) long before it can exhaust memory; strings are
/// borrowed from the input (their length checked against it) before being
/// copied, and [`DECODE_CLAIM_LIMIT`] caps anything bincode would still
/// allocate at a claimed length.
fn decode_body(body: &[u8]) -> Result<Dump, DecodeError> {
    let (dump, used) = bincode::serde::borrow_decode_from_slice::<Dump, _>(body, decode_config())
        .map_err(|e| DecodeError::Body(e.to_string()))?;
    if used != body.len() {
        return Err(DecodeError::Body(format!(
            "{} bytes left over after the profile",
            body.len() - used
        )));
    }
    Ok(dump)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_dump() -> Dump {
        Dump {
            writer: "test".into(),
            pid: 42,
            executable: "/bin/true".into(),
            command_line: vec!["true".into()],
            time_unix_ns: 1,
            trigger: Trigger::Final,
            seq: 0,
            trigger_seq: 0,
            lg_sample_period: 19,
            config: String::new(),
            modules: vec![Module {
                path: "/bin/true".into(),
                build_id: vec![1, 2, 3],
                load_bias: 0x1000,
                ranges: vec![(0x1000, 0x2000)],
                first_epoch: 0,
                last_epoch: None,
            }],
            threads: vec![],
            stacks: vec![Stack {
                frames: vec![0x1234, 0x1500],
                live_objects: 1,
                live_bytes: 100,
                ..Stack::default()
            }],
            totals: Totals::default(),
        }
    }

    /// A file with a valid header and checksum around any body.
    fn file_with_body(body: &[u8]) -> Vec<u8> {
        let mut file = Vec::new();
        file.extend_from_slice(&MAGIC);
        file.extend_from_slice(&VERSION.to_le_bytes());
        file.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
        file.extend_from_slice(&(body.len() as u64).to_le_bytes());
        file.extend_from_slice(body);
        file
    }

    #[test]
    fn round_trip() {
        let dump = sample_dump();
        assert_eq!(decode(&encode(&dump)).unwrap(), dump);
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = encode(&sample_dump());
        for len in 0..bytes.len() {
            assert!(
                decode(&bytes[..len]).is_err(),
                "prefix of {len} bytes decoded"
            );
        }
    }

    #[test]
    fn every_bit_flip_is_an_error() {
        let bytes = encode(&sample_dump());
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut damaged = bytes.clone();
                damaged[i] ^= 1 << bit;
                assert!(
                    decode(&damaged).is_err(),
                    "flip of bit {bit} in byte {i} decoded"
                );
            }
        }
    }

    #[test]
    fn huge_claimed_length_fails_fast() {
        // A valid header and checksum around a body that claims 2^60 stacks.
        let mut body = bincode::serde::encode_to_vec(sample_dump(), config()).unwrap();
        // Replace the body by its prefix up to the stacks length and a huge varint.
        let prefix_len = {
            let mut d = sample_dump();
            d.stacks.clear();
            d.totals = Totals::default();
            let b = bincode::serde::encode_to_vec(&d, config()).unwrap();
            // the stacks length (0, one byte) sits before the totals (9 bytes of zero varints + Option None)
            b.len() - 10
        };
        body.truncate(prefix_len - 1);
        body.push(253); // u64 varint marker
        body.extend_from_slice(&(1u64 << 60).to_le_bytes());
        body.extend_from_slice(&[0u8; 1000]);
        let file = file_with_body(&body);
        let started = std::time::Instant::now();
        assert!(matches!(decode(&file), Err(DecodeError::Body(_))));
        assert!(started.elapsed().as_secs() < 5);
    }

    #[test]
    fn huge_string_length_is_an_error_not_an_allocation() {
        // The body starts with the `writer` string: claim 2^60 bytes for it.
        let mut body = vec![255u8];
        body.extend_from_slice(&(1u128 << 60).to_le_bytes());
        body.extend_from_slice(&[b'x'; 64]);
        let file = file_with_body(&body);
        assert!(matches!(decode(&file), Err(DecodeError::Body(_))));
        // And 2^40, which would be allocated if it were not for the limit.
        let mut body = vec![253u8];
        body.extend_from_slice(&(1u64 << 40).to_le_bytes());
        body.extend_from_slice(&[b'x'; 64]);
        let file = file_with_body(&body);
        assert!(matches!(decode(&file), Err(DecodeError::Body(_))));
    }

    #[test]
    fn foreign_and_version() {
        assert_eq!(decode(b""), Err(DecodeError::TooShort { len: 0 }));
        assert_eq!(
            decode(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"),
            Err(DecodeError::Foreign)
        );
        let mut bytes = encode(&sample_dump());
        bytes[8] = 9;
        assert_eq!(
            decode(&bytes),
            Err(DecodeError::UnsupportedVersion { found: 9 })
        );
    }

    #[test]
    fn unsample_matches_formula() {
        assert_eq!(unsample(10, 1000, 1), (10.0, 1000.0));
        let (n, b) = unsample(1, 524288, 524288);
        let scale = 1.0 / (1.0 - (-1.0f64).exp());
        assert!((n - scale).abs() < 1e-9 && (b - 524288.0 * scale).abs() < 1e-6);
    }
}
