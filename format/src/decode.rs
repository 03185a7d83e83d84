//! Reading a dump: the header checked, the body decoded by the module of
//! its version (see `versions`) into the model, and the result validated.
//! Never panics; memory stays proportional to the file's size whatever it
//! claims.

use crate::error::DecodeError;
use crate::header::checked_body;
use crate::lifetimes::LIFETIME_BUCKETS;
use crate::model::{Dump, Weights};
use crate::versions;

/// Parse complete file contents. Never panics; every failure is a
/// [`DecodeError`] that says what is wrong. A dump of an older version is
/// converted (see [`LEGACY_VERSION`](crate::LEGACY_VERSION));
/// [`decode_versioned`] tells which version it was.
pub fn decode(file: &[u8]) -> Result<Dump, DecodeError> {
    decode_versioned(file).map(|(dump, _)| dump)
}

/// [`decode`], also returning the format version the file was written in.
pub fn decode_versioned(file: &[u8]) -> Result<(Dump, u32), DecodeError> {
    let (version, body) = checked_body(file)?;
    let dump = versions::decode_body(version, body)?;
    validate(&dump)?;
    Ok((dump, version))
}

/// What the estimators downstream rely on: every weight is finite and not
/// negative, no positive sum of weights is below one unit (each sampled
/// object weighs `1/p ≥ 1`: see [`below_its_samples`]), lifetime buckets exist and come in increasing
/// order, and every live sample names a stack of the dump.
fn validate(dump: &Dump) -> Result<(), DecodeError> {
    let bad = |why: String| Err(DecodeError::Body(why));
    let valid = |weights: &Weights| {
        weights
            .as_array()
            .iter()
            .all(|value| value.is_finite() && *value >= 0.0)
    };
    for (index, stack) in dump.stacks.iter().enumerate() {
        let lifetimes = stack.lifetimes.iter().map(|bucket| &bucket.weights);
        if ![&stack.live, &stack.alloc]
            .into_iter()
            .chain(lifetimes)
            .all(valid)
        {
            return bad(format!("stack {index} has a negative or non-finite weight"));
        }
        if below_its_samples(stack) {
            return bad(format!(
                "stack {index} has a weight below 1 (no sampled object weighs less)"
            ));
        }
        let ordered = stack
            .lifetimes
            .windows(2)
            .all(|pair| pair[0].bucket < pair[1].bucket);
        let last = stack.lifetimes.last().map_or(0, |b| usize::from(b.bucket));
        if !ordered || last >= LIFETIME_BUCKETS {
            return bad(format!(
                "stack {index} has lifetime buckets out of order or range"
            ));
        }
    }
    if !valid(&dump.totals.dropped) {
        return bad("the dropped samples have a negative or non-finite weight".into());
    }
    if let Some(sample) = dump
        .live_samples
        .iter()
        .find(|sample| sample.stack as usize >= dump.stacks.len())
    {
        return bad(format!(
            "a live sample names stack {} of {}",
            sample.stack,
            dump.stacks.len()
        ));
    }
    Ok(())
}

/// True when a positive sum of weights of `stack` is below one unit (a
/// subnormal weight, say): no shim writes that (a sample's weight is the
/// inverse of a probability, at least 1), and the intervals' gamma limit
/// has no meaning below one unit. A sum is not compared with its count:
/// a dump assembled while threads allocate and free may read a stack's
/// count after a sample and its weights before it. A sum of zero is "not
/// weighed" (hand-made dumps) and stays accepted: it gives estimates of
/// zero, never an interval from a sub-unit weight.
fn below_its_samples(stack: &crate::model::Stack) -> bool {
    const RELATIVE: f64 = 1e-9;
    let below_one = |weight: f64| weight > 0.0 && weight < 1.0 - RELATIVE;
    let (live, alloc) = (&stack.live, &stack.alloc);
    [live.objects, live.bytes, alloc.objects, alloc.bytes]
        .into_iter()
        .chain(
            stack
                .lifetimes
                .iter()
                .flat_map(|bucket| [bucket.weights.objects, bucket.weights.bytes]),
        )
        .any(below_one)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::config;
    use crate::encode::encode;
    use crate::file_layout::VERSION;
    use crate::test_dumps::{file_with_body, sample_dump};

    /// CPU seconds this thread has used.
    fn thread_cpu_seconds() -> f64 {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec we own.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
        assert_eq!(rc, 0);
        now.tv_sec as f64 + now.tv_nsec as f64 * 1e-9
    }

    #[test]
    fn round_trip() {
        let dump = sample_dump();
        assert_eq!(decode(&encode(&dump)).unwrap(), dump);
    }

    #[test]
    fn weights_below_one_are_refused() {
        let mut dump = sample_dump();
        let stack = 0;
        dump.stacks[stack].live.objects = 5e-324;
        let error = decode(&encode(&dump)).unwrap_err().to_string();
        assert!(error.contains("weight below 1"), "{error}");
        // The rounding residue of a live sum is not a weight below 1.
        let mut dump = sample_dump();
        let stack = &mut dump.stacks[stack];
        stack.alloc_objects = 3;
        stack.alloc.objects = 3.5;
        stack.live.objects = stack.live_objects as f64 - 1e-13;
        assert!(decode(&encode(&dump)).is_ok());
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
        let d = sample_dump();
        // The fields before the stacks, encoded alone: where the stacks'
        // length starts.
        let before_stacks = (
            &d.writer,
            d.pid,
            &d.executable,
            &d.command_line,
            d.time_unix_ns,
            d.trigger,
            d.seq,
            d.trigger_seq,
            d.lg_sample_period,
            &d.config,
            &d.modules,
            &d.threads,
        );
        let mut body = bincode::serde::encode_to_vec(before_stacks, config()).unwrap();
        body.push(253); // u64 varint marker
        body.extend_from_slice(&(1u64 << 60).to_le_bytes());
        body.extend_from_slice(&[0u8; 1000]);
        let file = file_with_body(VERSION, &body);
        // Fast: under 5 s of this thread's CPU time (not of the wall clock,
        // which a loaded machine stretches past any bound).
        let started = thread_cpu_seconds();
        assert!(matches!(decode(&file), Err(DecodeError::Body(_))));
        assert!(thread_cpu_seconds() - started < 5.0);
    }

    #[test]
    fn huge_string_length_is_an_error_not_an_allocation() {
        // The body starts with the `writer` string: claim 2^60 bytes for it.
        let mut body = vec![255u8];
        body.extend_from_slice(&(1u128 << 60).to_le_bytes());
        body.extend_from_slice(&[b'x'; 64]);
        let file = file_with_body(VERSION, &body);
        assert!(matches!(decode(&file), Err(DecodeError::Body(_))));
        // And 2^40, which would be allocated if it were not for the limit.
        let mut body = vec![253u8];
        body.extend_from_slice(&(1u64 << 40).to_le_bytes());
        body.extend_from_slice(&[b'x'; 64]);
        let file = file_with_body(VERSION, &body);
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
        assert_eq!(
            DecodeError::UnsupportedVersion { found: 9 }.to_string(),
            "dump format version 9 is not supported (this heapdiff reads versions 2, 3, 4 and 5)"
        );
    }
}
