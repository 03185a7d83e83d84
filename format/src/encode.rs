//! Writing a dump: the body in the current version's layout (the model's
//! own serde layout, bincode 2 "standard"), streamed in chunks behind a
//! header written last.

use crate::codec::config;
use crate::file_layout::{HEADER_LEN, VERSION};
use crate::header::header;
use crate::model::Dump;

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
        hasher: BodyCrc::default(),
        len: 0,
    };
    bincode::serde::encode_into_writer(dump, &mut body, config()).map_err(|error| match error {
        bincode::error::EncodeError::Io { inner, .. } => inner,
        other => std::io::Error::other(other.to_string()),
    })?;
    body.write_chunk()?;
    let (crc, len) = (body.hasher.finalize(), body.len);
    out.seek(std::io::SeekFrom::Start(start))?;
    out.write_all(&header(VERSION, crc, len))?;
    out.seek(std::io::SeekFrom::Start(start + HEADER_LEN as u64 + len))?;
    Ok(())
}

/// The body being encoded: collected in a chunk (bincode's many small
/// writes stay plain copies), which is checksummed, counted and written out
/// whole.
struct ChunkedBody<'a, W: std::io::Write> {
    out: &'a mut W,
    chunk: Vec<u8>,
    hasher: BodyCrc,
    len: u64,
}

/// The body's CRC-32 (IEEE, crc32fast's): the first chunk through a table
/// (`crc`), every later one through crc32fast, which continues from the
/// first chunk's value. crc32fast picks its carry-less multiply code by
/// asking the CPU (`cpuid`, several microseconds per instruction in a
/// virtual machine, tens per process); a dump of one chunk (every
/// short-lived process's exit dump) is too small for that to pay.
#[derive(Default)]
enum BodyCrc {
    #[default]
    Empty,
    FirstChunk(u32),
    Later(crc32fast::Hasher),
}

/// CRC-32/ISO-HDLC, the polynomial and conventions of crc32fast.
static TABLE_CRC: crc::Crc<u32, crc::Table<16>> =
    crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISO_HDLC);

impl BodyCrc {
    fn update(&mut self, bytes: &[u8]) {
        *self = match core::mem::take(self) {
            BodyCrc::Empty => BodyCrc::FirstChunk(TABLE_CRC.checksum(bytes)),
            BodyCrc::FirstChunk(value) => {
                let mut hasher = crc32fast::Hasher::new_with_initial(value);
                hasher.update(bytes);
                BodyCrc::Later(hasher)
            }
            BodyCrc::Later(mut hasher) => {
                hasher.update(bytes);
                BodyCrc::Later(hasher)
            }
        };
    }

    fn finalize(self) -> u32 {
        match self {
            BodyCrc::Empty => 0,
            BodyCrc::FirstChunk(value) => value,
            BodyCrc::Later(hasher) => hasher.finalize(),
        }
    }
}

impl<W: std::io::Write> ChunkedBody<'_, W> {
    const CHUNK_BYTES: usize = 64 << 10;

    /// Out of line (once per chunk), so that the per-field write that may
    /// call it stays small enough to be inlined into the encoder wherever
    /// it is instantiated (inlined, it cost a dump 2.5x the instructions).
    #[inline(never)]
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Stack;

    /// The body's CRC is crc32fast's over the whole body, however it is
    /// split into chunks (one chunk, or a first chunk and crc32fast after it).
    #[test]
    fn the_body_crc_is_crc32fasts_over_any_chunks() {
        let body: Vec<u8> = (0..200_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in [0, 1, 15, 16, 17, 65_535, 65_536, 65_537, 131_072, 200_000] {
            for chunk in [1, 7, 65_536] {
                let mut crc = BodyCrc::default();
                for piece in body[..len].chunks(chunk).take(40) {
                    crc.update(piece);
                }
                let covered = len.min(chunk * 40);
                assert_eq!(
                    crc.finalize(),
                    crc32fast::hash(&body[..covered]),
                    "{len} in {chunk}"
                );
            }
        }
    }

    /// A dump of more than one chunk reads back (its CRC checked).
    #[test]
    fn a_dump_of_several_chunks_reads_back() {
        let mut dump = crate::test_dumps::sample_dump();
        let template = dump.stacks[0].clone();
        dump.stacks = (0..3_000u64)
            .map(|i| Stack {
                frames: (0..16)
                    .map(|f| 0x7f00_0000_0000 + i * 4096 + f * 8)
                    .collect(),
                ..template.clone()
            })
            .collect();
        let bytes = encode(&dump);
        assert!(bytes.len() > 2 * ChunkedBody::<std::io::Cursor<Vec<u8>>>::CHUNK_BYTES);
        let back = crate::decode(&bytes).expect("a dump of several chunks decodes");
        assert_eq!(back.stacks.len(), dump.stacks.len());
        assert_eq!(back.stacks[2_999].frames, dump.stacks[2_999].frames);
    }
}
