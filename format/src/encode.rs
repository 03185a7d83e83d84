//! Writing a dump: the body in the current version's layout (the model's
//! own serde layout, bincode 2 "standard"), streamed in chunks behind a
//! header written last.

use crate::header::{HEADER_LEN, header};
use crate::model::Dump;
use crate::versions::VERSION;

/// bincode's configuration for bodies.
pub(crate) fn config() -> bincode::config::Configuration {
    bincode::config::standard()
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
    hasher: crc32fast::Hasher,
    len: u64,
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
