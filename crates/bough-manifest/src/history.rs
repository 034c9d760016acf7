//! The `HISTORY` extension of a history point (`history_<stamp>_<branch>_<term>`): when the
//! state the point records became the branch's state, and the branch's version just
//! before the record that made it.
//!
//! A point-in-time read at instant `t` starts from the newest point whose time is at or
//! before `t` and replays the point's `LOG` references up to the last commit at or before
//! `t` (ARCHITECTURE.md, "Point in time"). `before` lets the read tell that every state
//! between two points is accounted for: the later point's `before` must be the version the
//! earlier point's log reaches; a higher one means a state change whose point was never
//! written (its write failed), and instants from there on until the later point are refused.
//!
//! Payload: `time` varint (ms since the epoch) · `before` varint, nothing after them. Even
//! tag: a point that lost it cannot be placed in time, and reading it is `Corruption`.

use crate::codec::{Reader, put_varint};
use crate::error::DecodeReason;
use crate::ext::{self, Extensions};

pub use crate::ext::HISTORY;

/// What a history point's `HISTORY` extension says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryStamp {
    /// Store-clock ms at which the point's state became the branch's state.
    pub time_ms: u64,
    /// The branch's version just before the record the point follows (its own version
    /// when that record changed nothing a reader sees).
    pub before: u64,
}

/// Encodes a `HISTORY` payload.
pub fn encode_history_stamp(s: HistoryStamp) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, s.time_ms);
    put_varint(&mut out, s.before);
    out
}

/// Decodes a `HISTORY` payload: exactly two canonical varints.
pub fn decode_history_stamp(bytes: &[u8]) -> Result<HistoryStamp, DecodeReason> {
    let mut r = Reader::new(bytes);
    let time_ms = r.varint()?;
    let before = r.varint()?;
    r.finish()?;
    Ok(HistoryStamp { time_ms, before })
}

/// The stamp a history point's extensions record, if any.
pub fn history_stamp(exts: &[(u64, Vec<u8>)]) -> Result<Option<HistoryStamp>, DecodeReason> {
    ext::get(exts, HISTORY)
        .map(decode_history_stamp)
        .transpose()
}

/// Stores a history point's stamp in an extension list.
pub fn set_history_stamp(exts: &mut Extensions, s: HistoryStamp) {
    ext::set(exts, HISTORY, encode_history_stamp(s));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        for (t, b) in [
            (0, 0),
            (1, 127),
            (128, 1),
            (1_700_000_000_000, 42),
            (u64::MAX, u64::MAX),
        ] {
            let s = HistoryStamp {
                time_ms: t,
                before: b,
            };
            assert_eq!(decode_history_stamp(&encode_history_stamp(s)), Ok(s));
            let mut exts = Vec::new();
            set_history_stamp(&mut exts, s);
            assert_eq!(history_stamp(&exts), Ok(Some(s)));
        }
        assert_eq!(history_stamp(&[]), Ok(None));
        // Empty, one varint only, overlong, unterminated, too long, trailing byte.
        for bad in [
            &[][..],
            &[0x05],
            &[0x80, 0x00, 0x01],
            &[0x01, 0x80],
            &[0xff; 11],
            &[0x05, 0x01, 0x00],
        ] {
            assert!(decode_history_stamp(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn golden_bytes() {
        let s = HistoryStamp {
            time_ms: 1_700_000_000_123,
            before: 300,
        };
        insta::assert_snapshot!(format!("{:02x?}", encode_history_stamp(s)));
    }
}
