//! The compact unwind rule for one code address and its 64-bit cache encoding.
//!
//! Owns what the fast path knows how to do with a CFI row: find the CFA from rsp or
//! rbp plus an offset, read the return address at CFA−8, and optionally restore rbp
//! from CFA+offset. Everything else is [`Rule::Unsupported`] (use libgcc), or
//! [`Rule::NoUnwindInfo`] where no unwind information exists at all.
//!
//! On aarch64 the same rule names sp for rsp and x29 for rbp, and says where the
//! return address is (`ReturnAddress`: still in x30, or saved at CFA+offset)
//! and whether it is signed (pointer authentication); its encoding keeps x86_64's
//! tag and CFA bits and packs the two saved-register offsets in eighths.
//!
//! Pure data: no memory access, no allocation.

/// The register the canonical frame address is computed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CfaBase {
    Rsp,
    Rbp,
}

/// How to step from a frame to its caller, for one code address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// CFA = `cfa_base` + `cfa_offset`; the return address is at CFA−8; the caller's
    /// rbp is at CFA + `saved_rbp_offset` if given, otherwise rbp is unchanged.
    Step {
        cfa_base: CfaBase,
        cfa_offset: i32,
        saved_rbp_offset: Option<i16>,
        /// Where the return address is (aarch64; x86_64's is always at CFA−8).
        #[cfg(target_arch = "aarch64")]
        return_address: ReturnAddress,
    },
    /// The return address is undefined: this is the outermost frame (`_start`, the
    /// child side of `clone3`).
    Outermost,
    /// The fast path cannot step from here: CFA expressions, signal trampolines,
    /// unusual rules. The capture falls back to libgcc.
    Unsupported,
    /// No loaded object and no section registered with libgcc has an FDE for
    /// the address (JIT code, code without CFI). Cached like any rule where
    /// the registered sections are all libgcc knows (`registered`): code
    /// generated there later has none either, and what could give it some
    /// (a `dlopen`, a registration) bumps the caches' generation.
    NoUnwindInfo,
}

/// A frame larger than this is treated as corrupt unwind state (and handed to libgcc).
pub(crate) const MAX_FRAME_BYTES: u64 = 64 << 20;

impl Rule {
    /// A [`Rule::Step`], or [`Rule::Unsupported`] for a step from rsp that would
    /// read outside its own frame: the CFA must lie 8 to [`MAX_FRAME_BYTES`] above
    /// rsp, 8-aligned, and a saved rbp between rsp and CFA−8, 8-aligned. A step
    /// from rsp built here therefore needs no bounds check but the stack's top
    /// when it is taken (rsp is always 8-aligned: the walk starts at a real stack
    /// pointer and every CFA it moves to is checked or built 8-aligned). A step
    /// from rbp is checked when it is taken, as rbp can hold anything.
    #[cfg(target_arch = "x86_64")]
    pub(crate) fn step(cfa_base: CfaBase, cfa_offset: i32, saved_rbp_offset: Option<i16>) -> Rule {
        let within_frame =
            |offset: i64| offset % 8 == 0 && offset <= -8 && offset >= -i64::from(cfa_offset);
        let checked = cfa_base == CfaBase::Rbp
            || (cfa_offset % 8 == 0
                && cfa_offset >= 8
                && i64::from(cfa_offset) as u64 <= MAX_FRAME_BYTES
                && saved_rbp_offset.is_none_or(|offset| within_frame(i64::from(offset))));
        if !checked {
            return Rule::Unsupported;
        }
        Rule::Step {
            cfa_base,
            cfa_offset,
            saved_rbp_offset,
        }
    }
}

/// Where an aarch64 frame's return address is.
#[cfg(target_arch = "aarch64")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReturnAddress {
    /// Its offset from the CFA where it is saved, or `None` while it is still in x30
    /// (usable only for a frame whose x30 is known: the first one, or one a signal
    /// interrupted).
    pub(crate) saved_at: Option<i16>,
    /// Signed by pointer authentication (`paciasp`): its code bits are stripped.
    pub(crate) signed: bool,
}

// Encoding: bits 0..8 tag, bit 8 "rbp saved", bits 16..32 saved-rbp offset (i16),
// bits 32..64 CFA offset (i32). Tag 0 never occurs, so 0 means "empty cache slot".
const TAG_STEP_RSP: u64 = 1;
const TAG_STEP_RBP: u64 = 2;
const TAG_OUTERMOST: u64 = 3;
const TAG_UNSUPPORTED: u64 = 4;
const TAG_NO_UNWIND_INFO: u64 = 5;
const RBP_SAVED: u64 = 1 << 8;
/// In a cached encoding (never from [`Rule::encode`]): the rule's code is the
/// profiler's own (`cache::mark_own_code`). A bit of the tag byte, so that a
/// marked step fails [`StepBits::of`] and the walk takes it on its slower path,
/// where it is noted: the fast path pays nothing for the mark.
pub(crate) const OWN_CODE: u64 = 0x80;
// aarch64 only: bit 9 "return address still in x30", bit 10 "return address signed";
// bits 16..29 the saved x30's offset from the CFA in eighths (i13), bits 29..32 the
// saved x29's offset from the saved x30's in eighths (i3: `stp x29, x30` gives -1).
#[cfg(target_arch = "aarch64")]
const RA_IN_X30: u64 = 1 << 9;
#[cfg(target_arch = "aarch64")]
const RA_SIGNED: u64 = 1 << 10;

/// True if an aarch64 step that saves x30 at `x30` and x29 at `x29` (offsets from
/// the CFA) can be encoded: 8-aligned, x30 within ±32 KiB (the frame-record area
/// of every frame compilers lay out below 4 KiB; larger frames save it near the
/// CFA), and x29 saved only beside a saved x30, within four slots of it.
#[cfg(target_arch = "aarch64")]
pub(crate) fn encodable_offsets(x30: Option<i64>, x29: Option<i64>) -> bool {
    match (x30, x29) {
        (_, Some(x29)) if x29 % 8 != 0 => false,
        (Some(x30), _) if x30 % 8 != 0 || !(-32768..32768).contains(&x30) => false,
        (None, Some(_)) => false,
        (Some(x30), Some(x29)) => (-4..4).contains(&((x29 - x30) / 8)),
        _ => true,
    }
}

/// True if `bits` encode [`Rule::Outermost`].
#[inline(always)]
pub(crate) fn is_outermost(bits: u64) -> bool {
    bits & 0xff == TAG_OUTERMOST
}

/// A [`Rule::Step`] read straight from its encoding (see [`StepBits::of`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct StepBits(u64);

impl StepBits {
    /// The step rule encoded in `bits`, or None for any other rule (or 0).
    #[inline(always)]
    pub(crate) fn of(bits: u64) -> Option<StepBits> {
        ((bits & 0xff).wrapping_sub(TAG_STEP_RSP) <= TAG_STEP_RBP - TAG_STEP_RSP)
            .then_some(StepBits(bits))
    }

    /// True if the CFA is computed from rbp, else from rsp.
    #[inline(always)]
    pub(crate) fn cfa_from_rbp(self) -> bool {
        self.0 & 0xff == TAG_STEP_RBP
    }

    /// The CFA's offset from its base register.
    #[inline(always)]
    pub(crate) fn cfa_offset(self) -> i64 {
        (self.0 as i64) >> 32
    }

    /// The saved rbp's offset from the CFA, if the rule restores rbp.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(crate) fn saved_rbp_offset(self) -> Option<i64> {
        (self.0 & RBP_SAVED != 0).then_some(i64::from((self.0 >> 16) as u16 as i16))
    }

    /// The saved x29's offset from the CFA, if the rule restores x29.
    #[cfg(target_arch = "aarch64")]
    #[inline(always)]
    pub(crate) fn saved_rbp_offset(self) -> Option<i64> {
        let from_x30 = ((self.0 as i64) << 32 >> 61) * 8;
        (self.0 & RBP_SAVED != 0).then_some(self.x30_offset() + from_x30)
    }

    /// The saved return address's offset from the CFA, or `None` while it is in x30.
    #[cfg(target_arch = "aarch64")]
    #[inline(always)]
    pub(crate) fn return_address_offset(self) -> Option<i64> {
        (self.0 & RA_IN_X30 == 0).then_some(self.x30_offset())
    }

    /// Bits 16..29: the saved x30's offset.
    #[cfg(target_arch = "aarch64")]
    #[inline(always)]
    fn x30_offset(self) -> i64 {
        ((self.0 as i64) << 35 >> 51) * 8
    }
}

impl Rule {
    /// The cache encoding; never 0.
    pub(crate) fn encode(self) -> u64 {
        match self {
            Rule::Step {
                cfa_base,
                cfa_offset,
                saved_rbp_offset,
                #[cfg(target_arch = "aarch64")]
                return_address,
            } => {
                let tag = match cfa_base {
                    CfaBase::Rsp => TAG_STEP_RSP,
                    CfaBase::Rbp => TAG_STEP_RBP,
                };
                #[cfg(target_arch = "x86_64")]
                let registers = match saved_rbp_offset {
                    Some(offset) => RBP_SAVED | (u64::from(offset as u16) << 16),
                    None => 0,
                };
                #[cfg(target_arch = "aarch64")]
                let registers = {
                    // Offsets `encodable_offsets` accepted.
                    let x30 = return_address.saved_at.map(|offset| offset / 8);
                    let x29 = match (saved_rbp_offset, x30) {
                        (Some(offset), Some(x30)) => {
                            RBP_SAVED | (u64::from((offset / 8 - x30) as u16 & 0x7) << 29)
                        }
                        _ => 0,
                    };
                    let x30 = match x30 {
                        Some(eighths) => u64::from(eighths as u16 & 0x1fff) << 16,
                        None => RA_IN_X30,
                    };
                    x29 | x30 | if return_address.signed { RA_SIGNED } else { 0 }
                };
                tag | registers | (u64::from(cfa_offset as u32) << 32)
            }
            Rule::Outermost => TAG_OUTERMOST,
            Rule::Unsupported => TAG_UNSUPPORTED,
            Rule::NoUnwindInfo => TAG_NO_UNWIND_INFO,
        }
    }

    /// Decodes a value produced by [`Rule::encode`], with or without the
    /// [`OWN_CODE`] mark; `None` for an empty slot (0) or anything else `encode`
    /// never produces.
    #[inline(always)]
    pub(crate) fn decode(bits: u64) -> Option<Rule> {
        let tag = bits & 0xff & !OWN_CODE;
        // The steps first: one range check for the rule of nearly every frame.
        let cfa_base = if tag.wrapping_sub(TAG_STEP_RSP) <= TAG_STEP_RBP - TAG_STEP_RSP {
            if tag == TAG_STEP_RSP {
                CfaBase::Rsp
            } else {
                CfaBase::Rbp
            }
        } else {
            return match tag {
                TAG_OUTERMOST => Some(Rule::Outermost),
                TAG_UNSUPPORTED => Some(Rule::Unsupported),
                TAG_NO_UNWIND_INFO => Some(Rule::NoUnwindInfo),
                _ => None,
            };
        };
        #[cfg(target_arch = "x86_64")]
        let saved_rbp_offset = (bits & RBP_SAVED != 0).then_some((bits >> 16) as u16 as i16);
        #[cfg(target_arch = "aarch64")]
        let saved_rbp_offset = StepBits(bits)
            .saved_rbp_offset()
            .map(|offset| offset as i16);
        Some(Rule::Step {
            cfa_base,
            cfa_offset: (bits >> 32) as u32 as i32,
            saved_rbp_offset,
            #[cfg(target_arch = "aarch64")]
            return_address: ReturnAddress {
                saved_at: StepBits(bits)
                    .return_address_offset()
                    .map(|offset| offset as i16),
                signed: bits & RA_SIGNED != 0,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn encoding_round_trips() {
        let rules = [
            Rule::Outermost,
            Rule::Unsupported,
            Rule::NoUnwindInfo,
            Rule::Step {
                cfa_base: CfaBase::Rsp,
                cfa_offset: 8,
                saved_rbp_offset: None,
            },
            Rule::Step {
                cfa_base: CfaBase::Rbp,
                cfa_offset: 16,
                saved_rbp_offset: Some(-16),
            },
            Rule::Step {
                cfa_base: CfaBase::Rsp,
                cfa_offset: i32::MAX,
                saved_rbp_offset: Some(i16::MIN),
            },
            Rule::Step {
                cfa_base: CfaBase::Rbp,
                cfa_offset: -40,
                saved_rbp_offset: Some(i16::MAX),
            },
        ];
        for rule in rules {
            assert_ne!(rule.encode(), 0);
            assert_eq!(Rule::decode(rule.encode()), Some(rule));
        }
        assert_eq!(Rule::decode(0), None);
    }

    #[cfg(target_arch = "aarch64")]
    #[test]
    fn aarch64_encoding_round_trips() {
        let step = |cfa_base, cfa_offset, x29: Option<i16>, saved_at, signed| Rule::Step {
            cfa_base,
            cfa_offset,
            saved_rbp_offset: x29,
            return_address: ReturnAddress { saved_at, signed },
        };
        let rules = [
            Rule::Outermost,
            Rule::Unsupported,
            Rule::NoUnwindInfo,
            step(CfaBase::Rsp, 0, None, None, false),
            step(CfaBase::Rbp, 16, Some(-16), Some(-8), true),
            step(CfaBase::Rsp, 96, Some(-96), Some(-88), false),
            step(CfaBase::Rsp, 4032, Some(-4032), Some(-4024), true),
            step(CfaBase::Rsp, i32::MAX, Some(-32768), Some(-32736), true),
            step(CfaBase::Rbp, -40, Some(32760), Some(32760), false),
            step(CfaBase::Rbp, -40, None, Some(-32768), false),
        ];
        for rule in rules {
            assert_ne!(rule.encode(), 0);
            assert_eq!(Rule::decode(rule.encode()), Some(rule));
        }
        assert_eq!(Rule::decode(0), None);
        assert!(encodable_offsets(Some(-4024), Some(-4032)));
        assert!(encodable_offsets(None, None) && encodable_offsets(Some(-8), None));
        assert!(!encodable_offsets(Some(32768), None) && !encodable_offsets(Some(-12), None));
        assert!(!encodable_offsets(None, Some(-16)) && !encodable_offsets(Some(-8), Some(-48)));
    }
}
