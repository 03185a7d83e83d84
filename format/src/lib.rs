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
/// The version written by this crate.
pub const VERSION: u32 = 3;
/// The previous version, still read: its stacks carry raw counts only, and
/// [`decode`] fills their weights with the old average-size correction
/// ([`legacy_weights`]).
pub const LEGACY_VERSION: u32 = 2;
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
    /// The cgroup's memory use crossed `prof_oom_pct` of its limit:
    /// `...o<oseq>.prof`.
    MemoryLimit,
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
            Trigger::MemoryLimit => 'o',
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

/// Horvitz–Thompson sums over a set of sampled objects.
///
/// An object of `s` bytes is sampled with probability `p` ([`inclusion_probability`]);
/// weighting each sampled object by `1/p` makes the sums unbiased estimates of
/// the true object count and bytes, whatever the mix of sizes, and the
/// variance sums are unbiased estimates of those estimates' variances
/// (each sampled object contributes `(1 − p)/p²` times its value squared).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Weights {
    /// Σ 1/p: the estimated number of objects.
    pub objects: f64,
    /// Σ s/p: the estimated bytes.
    pub bytes: f64,
    /// Σ (1 − p)/p²: the variance of `objects`.
    pub objects_variance: f64,
    /// Σ s²(1 − p)/p²: the variance of `bytes`.
    pub bytes_variance: f64,
}

impl Weights {
    /// The sums of `self` and `other` (disjoint sets of samples).
    pub fn plus(&self, other: &Weights) -> Weights {
        Weights {
            objects: self.objects + other.objects,
            bytes: self.bytes + other.bytes,
            objects_variance: self.objects_variance + other.objects_variance,
            bytes_variance: self.bytes_variance + other.bytes_variance,
        }
    }

    /// The four sums as an array (objects, bytes, their variances).
    pub fn as_array(&self) -> [f64; 4] {
        [
            self.objects,
            self.bytes,
            self.objects_variance,
            self.bytes_variance,
        ]
    }
}

/// The sampler's law for a mean period of `R` bytes, in one place for the
/// shim (which draws countdowns and weighs samples with it) and the reader
/// (which corrects with it): the bytes until the next sample are geometric
/// with mean `R`, so an allocation of `s` bytes is sampled with probability
/// `1 − (1 − 1/R)^s` whatever came before it (the law is memoryless).
///
/// Holds `ln(1 − 1/R)`, computed once: the shim caches it (as
/// [`SamplingLaw::to_bits`] in an atomic) so that a sample event takes no
/// logarithm. Pure arithmetic: no allocation, no lock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplingLaw {
    /// `ln(1 − 1/R)` (negative); 0 when every allocation is sampled (`R ≤ 1`).
    ln_keep: f64,
}

impl SamplingLaw {
    /// The law of a mean period of `period` bytes.
    pub fn new(period: u64) -> SamplingLaw {
        let ln_keep = if period <= 1 {
            0.0
        } else {
            libm::log1p(-1.0 / period as f64)
        };
        SamplingLaw { ln_keep }
    }

    /// The law as 64 bits, to keep in an atomic ([`SamplingLaw::from_bits`]).
    pub fn to_bits(self) -> u64 {
        self.ln_keep.to_bits()
    }

    /// The law [`SamplingLaw::to_bits`] gave `bits` for.
    pub fn from_bits(bits: u64) -> SamplingLaw {
        SamplingLaw {
            ln_keep: f64::from_bits(bits),
        }
    }

    /// True when every allocation is sampled (`R ≤ 1`).
    #[inline]
    pub fn samples_everything(self) -> bool {
        self.ln_keep == 0.0
    }

    /// The probability that an allocation of `size` bytes is sampled,
    /// `1 − (1 − 1/R)^s` (≈ `1 − exp(−s/R)`): 1 when every allocation is
    /// and, by convention, for empty ones (which the countdown never picks).
    #[inline]
    pub fn inclusion_probability(self, size: u64) -> f64 {
        if self.samples_everything() || size == 0 {
            return 1.0;
        }
        (-libm::expm1(size as f64 * self.ln_keep)).clamp(f64::MIN_POSITIVE, 1.0)
    }

    /// The probability that an allocation of `size` bytes is not sampled,
    /// `(1 − 1/R)^s`.
    pub fn keep_probability(self, size: u64) -> f64 {
        libm::exp(self.ln_keep * size as f64)
    }

    /// The bytes until the next sample for `uniform` drawn in (0, 1]: the
    /// geometric countdown with mean `R`, at least 1 (0 when every
    /// allocation is sampled), capped at `i64::MAX / 4`. The countdown ends
    /// within `s` bytes exactly when `uniform > (1 − 1/R)^s`, with
    /// probability [`SamplingLaw::inclusion_probability`].
    #[inline]
    pub fn bytes_until_sample(self, uniform: f64) -> i64 {
        if self.samples_everything() {
            return 0;
        }
        // ln(u) and ln(1 − 1/R) are both ≤ 0, so the quotient is ≥ 0 and
        // truncating it is its floor (without a call to `floor`).
        let before = libm::log(uniform) / self.ln_keep;
        if before >= (i64::MAX / 4 - 1) as f64 {
            i64::MAX / 4
        } else {
            before as i64 + 1
        }
    }
}

/// Probability that the sampler picks an allocation of `size` bytes when
/// its mean period is `period` bytes ([`SamplingLaw::inclusion_probability`]).
pub fn inclusion_probability(size: u64, period: u64) -> f64 {
    SamplingLaw::new(period).inclusion_probability(size)
}

/// What one sampled object of `size` bytes adds to a stack's [`Weights`].
/// Pure arithmetic (no allocation, no lock): the shim calls it inside
/// malloc at each sample event, and again with the same size when the object
/// is freed, so a free removes exactly what its allocation added.
pub fn sample_weights(size: u64, period: u64) -> Weights {
    weights_with_probability(size, inclusion_probability(size, period))
}

/// [`sample_weights`] for an object of `size` bytes sampled with
/// probability `p` (computed by the caller, e.g. with a cached logarithm).
pub fn weights_with_probability(size: u64, p: f64) -> Weights {
    let weight = 1.0 / p;
    let spread = (1.0 - p) / (p * p);
    let bytes = size as f64;
    Weights {
        objects: weight,
        bytes: bytes * weight,
        objects_variance: spread,
        bytes_variance: bytes * bytes * spread,
    }
}

/// Weights for a format-2 stack, which kept raw counts only: the old
/// correction, every sampled object taken to have the average size.
/// Biased when a stack mixes sizes (it over-weights large objects); kept
/// so that old dumps still read as they did.
pub fn legacy_weights(objects: u64, bytes: u64, period: u64) -> Weights {
    if objects == 0 {
        return Weights::default();
    }
    let average = (bytes as f64 / objects as f64).round() as u64;
    let one = sample_weights(average.max(1), period);
    let scale = unsample_scale(objects, bytes, period);
    let n = objects as f64;
    Weights {
        objects: n * scale,
        bytes: bytes as f64 * scale,
        objects_variance: n * one.objects_variance,
        bytes_variance: n * one.bytes_variance,
    }
}

/// One distinct call stack of sampled allocations, with its raw counts and
/// its Horvitz–Thompson [`Weights`].
///
/// Counts are what the sampler saw, not estimates; the weights are the
/// estimates (and their variances) of the true counts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// Weights of the sampled objects still live.
    pub live: Weights,
    /// Weights of all sampled objects allocated here (cumulative).
    pub alloc: Weights,
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
    /// Times the samples were forgotten (`heapsample_reset`) before this
    /// dump: two dumps of one process with the same count share their
    /// cumulative samples. 0 in format-2 dumps.
    pub resets: u64,
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
    if objects == 0 || period <= 1 {
        return 1.0;
    }
    let mean_size = bytes as f64 / objects as f64;
    let probability = -libm::expm1(-mean_size / period as f64);
    if probability <= 0.0 {
        return 1.0;
    }
    1.0 / probability
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
                "dump format version {found} is not supported (this heapdiff reads versions {LEGACY_VERSION} and {VERSION})"
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
    let mut out = std::io::Cursor::new(Vec::new());
    // Encoding plain data into memory cannot fail: no I/O, no unsupported types.
    let _ = encode_to(dump, &mut out);
    out.into_inner()
}

/// Write `dump` in the file format to `out` from its current position,
/// streaming the body in 64 KiB chunks (no copy of the encoded dump is held
/// in memory: a dump of tens of MB would otherwise double the memory a dump
/// takes). The header, whose CRC and length are known only at the end, is
/// written over a placeholder last, so `out` must be seekable and is left
/// at the end.
pub fn encode_to<W: std::io::Write + std::io::Seek>(
    dump: &Dump,
    out: &mut W,
) -> std::io::Result<()> {
    let start = out.stream_position()?;
    out.write_all(&[0u8; HEADER_LEN])?;
    let mut body = ChunkedBody {
        out: &mut *out,
        chunk: Vec::with_capacity(ChunkedBody::<W>::CHUNK_BYTES),
        hasher: crc32fast::Hasher::new(),
        len: 0,
    };
    bincode::serde::encode_into_writer(dump, &mut body, config()).map_err(|error| match error {
        bincode::error::EncodeError::Io { inner, .. } => inner,
        other => std::io::Error::other(other.to_string()),
    })?;
    body.write_chunk()?;
    let (crc, len) = (body.hasher.finalize(), body.len);
    let mut header = [0u8; HEADER_LEN];
    header[0..8].copy_from_slice(&MAGIC);
    header[8..12].copy_from_slice(&VERSION.to_le_bytes());
    header[12..16].copy_from_slice(&crc.to_le_bytes());
    header[16..24].copy_from_slice(&len.to_le_bytes());
    out.seek(std::io::SeekFrom::Start(start))?;
    out.write_all(&header)?;
    out.seek(std::io::SeekFrom::Start(start + HEADER_LEN as u64 + len))?;
    Ok(())
}

/// The body being encoded: collected in a chunk (bincode's many small
/// writes stay plain copies), which is checksummed, counted and written out
/// whole.
struct ChunkedBody<'a, W: std::io::Write> {
    out: &'a mut W,
    chunk: Vec<u8>,
    hasher: crc32fast::Hasher,
    len: u64,
}

impl<W: std::io::Write> ChunkedBody<'_, W> {
    const CHUNK_BYTES: usize = 64 << 10;

    fn write_chunk(&mut self) -> std::io::Result<()> {
        self.hasher.update(&self.chunk);
        self.len += self.chunk.len() as u64;
        self.out.write_all(&self.chunk)?;
        self.chunk.clear();
        Ok(())
    }
}

impl<W: std::io::Write> bincode::enc::write::Writer for ChunkedBody<'_, W> {
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> Result<(), bincode::error::EncodeError> {
        self.chunk.extend_from_slice(bytes);
        if self.chunk.len() >= Self::CHUNK_BYTES {
            let index = self.len as usize;
            self.write_chunk()
                .map_err(|inner| bincode::error::EncodeError::Io { inner, index })?;
        }
        Ok(())
    }
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
/// [`DecodeError`] that says what is wrong. A format-2 dump is converted
/// (see [`LEGACY_VERSION`]); [`decode_versioned`] tells which it was.
pub fn decode(file: &[u8]) -> Result<Dump, DecodeError> {
    decode_versioned(file).map(|(dump, _)| dump)
}

/// [`decode`], also returning the format version the file was written in.
pub fn decode_versioned(file: &[u8]) -> Result<(Dump, u32), DecodeError> {
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
    if version != VERSION && version != LEGACY_VERSION {
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
    if version == LEGACY_VERSION {
        return legacy::decode_body(body).map(|dump| (dump, version));
    }
    decode_body(body).map(|dump| (dump, version))
}

/// Decode a body. Memory stays proportional to the body's size: serde
/// preallocates at most 1 MiB per sequence whatever length the data claims,
/// every element consumes at least one input byte, so a lying length runs out
/// of input (an error) long before it can exhaust memory; strings are
/// borrowed from the input (their length checked against it) before being
/// copied, and [`DECODE_CLAIM_LIMIT`] caps anything bincode would still
/// allocate at a claimed length.
fn decode_body(body: &[u8]) -> Result<Dump, DecodeError> {
    let dump: Dump = decode_exactly(body)?;
    let bad_weight = dump.stacks.iter().position(|stack| {
        [stack.live, stack.alloc]
            .iter()
            .flat_map(Weights::as_array)
            .any(|value| !value.is_finite() || value < 0.0)
    });
    match bad_weight {
        Some(index) => Err(DecodeError::Body(format!(
            "stack {index} has a negative or non-finite weight"
        ))),
        None => Ok(dump),
    }
}

/// Decode a whole body as one `T`, with the limits of [`decode_body`].
fn decode_exactly<'de, T: Deserialize<'de>>(body: &'de [u8]) -> Result<T, DecodeError> {
    let (dump, used) = bincode::serde::borrow_decode_from_slice::<T, _>(body, decode_config())
        .map_err(|e| DecodeError::Body(e.to_string()))?;
    if used != body.len() {
        return Err(DecodeError::Body(format!(
            "{} bytes left over after the profile",
            body.len() - used
        )));
    }
    Ok(dump)
}

/// The format-2 layout, decoded and converted to the current [`Dump`].
mod legacy {
    use super::{
        DecodeError, Deserialize, Dump, Module, Stack, ThreadInfo, Trigger, decode_exactly,
        legacy_weights, owned_from_borrowed, owned_list_from_borrowed,
    };

    #[derive(Deserialize)]
    #[cfg_attr(test, derive(serde::Serialize))]
    pub(super) struct StackV2 {
        pub(super) frames: Vec<u64>,
        pub(super) thread: u32,
        pub(super) epoch: u32,
        pub(super) live_objects: u64,
        pub(super) live_bytes: u64,
        pub(super) live_usable_bytes: u64,
        pub(super) alloc_objects: u64,
        pub(super) alloc_bytes: u64,
    }

    #[derive(Deserialize)]
    #[cfg_attr(test, derive(serde::Serialize))]
    pub(super) struct TotalsV2 {
        pub(super) allocations: u64,
        pub(super) frees: Option<u64>,
        pub(super) bytes_allocated: u64,
        pub(super) live_usable_bytes: Option<u64>,
        pub(super) samples_taken: u64,
        pub(super) samples_dropped: u64,
        pub(super) samples_live: u64,
        pub(super) threads_seen: u64,
        pub(super) profiler_bytes: u64,
    }

    #[derive(Deserialize)]
    #[cfg_attr(test, derive(serde::Serialize))]
    pub(super) struct DumpV2 {
        #[serde(deserialize_with = "owned_from_borrowed")]
        pub(super) writer: String,
        pub(super) pid: u32,
        #[serde(deserialize_with = "owned_from_borrowed")]
        pub(super) executable: String,
        #[serde(deserialize_with = "owned_list_from_borrowed")]
        pub(super) command_line: Vec<String>,
        pub(super) time_unix_ns: u64,
        pub(super) trigger: Trigger,
        pub(super) seq: u64,
        pub(super) trigger_seq: u64,
        pub(super) lg_sample_period: u32,
        #[serde(deserialize_with = "owned_from_borrowed")]
        pub(super) config: String,
        pub(super) modules: Vec<Module>,
        pub(super) threads: Vec<ThreadInfo>,
        pub(super) stacks: Vec<StackV2>,
        pub(super) totals: TotalsV2,
    }

    pub(super) fn decode_body(body: &[u8]) -> Result<Dump, DecodeError> {
        let old: DumpV2 = decode_exactly(body)?;
        let period = 1u64 << old.lg_sample_period.min(62);
        let stacks = old
            .stacks
            .into_iter()
            .map(|s| Stack {
                live: legacy_weights(s.live_objects, s.live_bytes, period),
                alloc: legacy_weights(s.alloc_objects, s.alloc_bytes, period),
                frames: s.frames,
                thread: s.thread,
                epoch: s.epoch,
                live_objects: s.live_objects,
                live_bytes: s.live_bytes,
                live_usable_bytes: s.live_usable_bytes,
                alloc_objects: s.alloc_objects,
                alloc_bytes: s.alloc_bytes,
            })
            .collect();
        let t = old.totals;
        Ok(Dump {
            writer: old.writer,
            pid: old.pid,
            executable: old.executable,
            command_line: old.command_line,
            time_unix_ns: old.time_unix_ns,
            trigger: old.trigger,
            seq: old.seq,
            trigger_seq: old.trigger_seq,
            lg_sample_period: old.lg_sample_period,
            config: old.config,
            modules: old.modules,
            threads: old.threads,
            stacks,
            totals: super::Totals {
                allocations: t.allocations,
                frees: t.frees,
                bytes_allocated: t.bytes_allocated,
                live_usable_bytes: t.live_usable_bytes,
                samples_taken: t.samples_taken,
                samples_dropped: t.samples_dropped,
                samples_live: t.samples_live,
                threads_seen: t.threads_seen,
                profiler_bytes: t.profiler_bytes,
                resets: 0,
            },
        })
    }
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
            // the stacks length (0, one byte) sits before the totals (10 bytes of zero varints + Options None)
            b.len() - 11
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
    fn weights_of_one_sample() {
        // Every allocation sampled: weights are the counts, no variance.
        let exact = sample_weights(100, 1);
        assert_eq!(exact.as_array(), [1.0, 100.0, 0.0, 0.0]);
        // p = 1 − (1 − 1/R)^s.
        let period = 1u64 << 19;
        let p = 1.0 - (1.0 - 1.0 / period as f64).powf(100.0);
        let w = sample_weights(100, period);
        assert!((w.objects - 1.0 / p).abs() < 1e-6 * w.objects);
        assert!((w.bytes - 100.0 / p).abs() < 1e-6 * w.bytes);
        assert!((w.objects_variance - (1.0 - p) / (p * p)).abs() < 1e-6 * w.objects_variance);
        assert!((w.bytes_variance - 1e4 * (1.0 - p) / (p * p)).abs() < 1e-6 * w.bytes_variance);
        // Huge objects are (almost) always sampled: weight 1, no variance.
        let huge = sample_weights(64 << 20, period);
        assert!((huge.objects - 1.0).abs() < 1e-12 && huge.objects_variance < 1e-12);
        assert_eq!(sample_weights(0, period).objects, 1.0);
    }

    #[test]
    fn the_countdown_ends_within_s_bytes_with_the_inclusion_probability() {
        // bytes_until_sample(u) <= s exactly when u > (1 - 1/R)^s: at the
        // uniforms just above and below that threshold the countdown falls
        // on either side of s, so P(countdown <= s) = inclusion_probability.
        for period in [2u64, 4096, 1 << 19] {
            let law = SamplingLaw::new(period);
            assert_eq!(SamplingLaw::from_bits(law.to_bits()), law);
            for size in [1u64, 100, 4096, 1 << 20] {
                let keep = law.keep_probability(size);
                let p = law.inclusion_probability(size);
                assert!((p + keep - 1.0).abs() < 1e-12, "R {period} s {size}");
                let above = (keep * (1.0 + 1e-9)).min(1.0);
                let below = keep * (1.0 - 1e-9);
                if above > keep {
                    assert!(law.bytes_until_sample(above) <= size as i64);
                }
                assert!(law.bytes_until_sample(below) > size as i64);
            }
            assert_eq!(
                law.bytes_until_sample(1.0),
                1,
                "the countdown is at least 1"
            );
        }
        let every = SamplingLaw::new(1);
        assert!(every.samples_everything());
        assert_eq!(every.bytes_until_sample(0.5), 0);
        assert_eq!(every.inclusion_probability(12345), 1.0);
    }

    #[test]
    fn weights_are_unbiased_over_the_sampling_law() {
        // E[Σ 1{sampled}·w] over the exact Bernoulli law, for a mix of sizes:
        // the expectation of the estimate is the truth, and the expectation
        // of the variance sum is the variance of the estimate.
        let period = 1u64 << 16;
        for size in [1u64, 100, 4096, 65536, 1 << 20] {
            let p = inclusion_probability(size, period);
            let w = sample_weights(size, period);
            assert!((p * w.objects - 1.0).abs() < 1e-9);
            assert!((p * w.bytes - size as f64).abs() < 1e-6 * size as f64);
            let variance = p * w.objects * w.objects - 1.0;
            assert!((p * w.objects_variance - variance).abs() < 1e-6 * variance.max(1e-9));
        }
    }

    #[test]
    fn version_2_dumps_decode_with_the_old_correction() {
        let v2 = legacy::DumpV2 {
            writer: "old".into(),
            pid: 7,
            executable: "/bin/true".into(),
            command_line: vec!["true".into()],
            time_unix_ns: 1,
            trigger: Trigger::Final,
            seq: 0,
            trigger_seq: 0,
            lg_sample_period: 19,
            config: String::new(),
            modules: vec![],
            threads: vec![],
            stacks: vec![legacy::StackV2 {
                frames: vec![1, 2],
                thread: 1,
                epoch: 0,
                live_objects: 4,
                live_bytes: 4000,
                live_usable_bytes: 4096,
                alloc_objects: 5,
                alloc_bytes: 5000,
            }],
            totals: legacy::TotalsV2 {
                allocations: 10,
                frees: None,
                bytes_allocated: 100,
                live_usable_bytes: None,
                samples_taken: 5,
                samples_dropped: 0,
                samples_live: 4,
                threads_seen: 1,
                profiler_bytes: 0,
            },
        };
        let body = bincode::serde::encode_to_vec(&v2, config()).unwrap();
        let mut file = file_with_body(&body);
        file[8..12].copy_from_slice(&LEGACY_VERSION.to_le_bytes());
        let (dump, version) = decode_versioned(&file).unwrap();
        assert_eq!(version, LEGACY_VERSION);
        let stack = &dump.stacks[0];
        let (n, b) = unsample(4, 4000, 1 << 19);
        assert!((stack.live.objects - n).abs() < 1e-9 && (stack.live.bytes - b).abs() < 1e-6);
        assert!(stack.live.bytes_variance > 0.0);
        assert_eq!((stack.alloc_objects, dump.totals.samples_live), (5, 4));
    }

    #[test]
    fn unsample_matches_formula() {
        assert_eq!(unsample(10, 1000, 1), (10.0, 1000.0));
        let (n, b) = unsample(1, 524288, 524288);
        let scale = 1.0 / (1.0 - (-1.0f64).exp());
        assert!((n - scale).abs() < 1e-9 && (b - 524288.0 * scale).abs() < 1e-6);
    }
}
