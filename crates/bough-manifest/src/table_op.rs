//! Records of the store's branch registry: the intent of one table-wide branch operation
//! (`tableop_<seq>`), written and synced before any partition acts, and its outcome
//! (`tableop_<seq>_end`), written once every partition acted or none did
//! (`docs/format.md`, "Table-wide branch operations").
//!
//! | bytes   | field                                                           |
//! |---------|-----------------------------------------------------------------|
//! | 0..8    | `checksum(Other("bough/table-op"), bytes[8..])`, LE             |
//! | 8..12   | magic `BTOP`                                                    |
//! | 12..14  | version = 1, LE                                                 |
//! | 14      | kind: 1 intent, 2 outcome                                       |
//! | 15      | reserved, 0                                                     |
//! | 16..24  | the operation's sequence number, LE (the one in the file name)  |
//! | 24..28  | body length, LE (at most [`MAX_TABLE_OP_BODY`])                 |
//! | 28..    | body                                                            |

use crate::checksum::{Domain, checksum};
use crate::codec::Reader;
use crate::error::{DecodeError, DecodeReason};
use crate::varint;

/// Magic of a table-op record.
pub const TABLE_OP_MAGIC: [u8; 4] = *b"BTOP";
/// Format version of table-op records.
pub const TABLE_OP_VERSION: u16 = 1;
/// Header length.
pub const TABLE_OP_HEADER_LEN: usize = 28;
/// Largest body a record may have (a million partitions of 4-byte varints fit).
pub const MAX_TABLE_OP_BODY: u32 = 4 << 20;
/// Longest outcome detail.
pub const MAX_TABLE_OP_DETAIL: usize = 4096;
const DOMAIN: Domain = Domain::Other("bough/table-op");
const KIND_INTENT: u8 = 1;
const KIND_OUTCOME: u8 = 2;

/// Which table-wide operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableOpKind {
    /// Create `branch` from `other` on every partition.
    Create,
    /// Delete `branch` on every partition.
    Delete,
    /// Archive `branch` on every partition at `timestamp`.
    Archive,
    /// Merge `other` into `branch` on every partition with `policy`.
    Merge,
}

impl TableOpKind {
    fn code(self) -> u8 {
        match self {
            TableOpKind::Create => 1,
            TableOpKind::Delete => 2,
            TableOpKind::Archive => 3,
            TableOpKind::Merge => 4,
        }
    }

    fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            1 => TableOpKind::Create,
            2 => TableOpKind::Delete,
            3 => TableOpKind::Archive,
            4 => TableOpKind::Merge,
            _ => return None,
        })
    }
}

/// What a table-wide operation is, recorded before any partition acts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableOpIntent {
    /// The operation.
    pub kind: TableOpKind,
    /// The table (validated by the caller against the table grammar; bytes here).
    pub table: String,
    /// The branch created, deleted, archived, or merged into.
    pub branch: String,
    /// The source: the branch a create forks from, the branch a merge takes; empty
    /// otherwise.
    pub other: String,
    /// The archive timestamp shared by every partition (an archive), else the store clock
    /// when the intent was written.
    pub timestamp: u64,
    /// A merge's conflict policy code (0 fail, 1 ours, 2 theirs, 3 newest timestamp); 0
    /// otherwise.
    pub policy: u8,
    /// The partitions the operation spans, strictly increasing.
    pub partitions: Vec<u32>,
}

/// How a table-wide operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableOpResult {
    /// It happened on every partition it names.
    Applied,
    /// It happened on none (undone where it had begun).
    RolledBack,
}

/// The outcome record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableOpOutcome {
    /// How it ended.
    pub result: TableOpResult,
    /// Why, in words (an error that made it roll back); at most [`MAX_TABLE_OP_DETAIL`]
    /// bytes, cut at a character boundary when encoded.
    pub detail: String,
}

/// A decoded table-op record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableOpRecord {
    /// `tableop_<seq>`.
    Intent(TableOpIntent),
    /// `tableop_<seq>_end`.
    Outcome(TableOpOutcome),
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    varint::put(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

fn seal(seq: u64, kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; 8];
    out.extend_from_slice(&TABLE_OP_MAGIC);
    out.extend_from_slice(&TABLE_OP_VERSION.to_le_bytes());
    out.push(kind);
    out.push(0);
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    let sum = checksum(DOMAIN, out.get(8..).unwrap_or_default());
    if let Some(head) = out.get_mut(0..8) {
        head.copy_from_slice(&sum.to_le_bytes());
    }
    out
}

impl TableOpIntent {
    /// The record `tableop_<seq>` holds.
    pub fn encode(&self, seq: u64) -> Vec<u8> {
        let mut body = vec![self.kind.code()];
        put_str(&mut body, &self.table);
        put_str(&mut body, &self.branch);
        put_str(&mut body, &self.other);
        varint::put(&mut body, self.timestamp);
        body.push(self.policy);
        varint::put(&mut body, self.partitions.len() as u64);
        for p in &self.partitions {
            varint::put(&mut body, u64::from(*p));
        }
        seal(seq, KIND_INTENT, &body)
    }
}

impl TableOpOutcome {
    /// The record `tableop_<seq>_end` holds.
    pub fn encode(&self, seq: u64) -> Vec<u8> {
        let mut cut = self.detail.len().min(MAX_TABLE_OP_DETAIL);
        while !self.detail.is_char_boundary(cut) {
            cut -= 1;
        }
        let code = match self.result {
            TableOpResult::Applied => 1,
            TableOpResult::RolledBack => 2,
        };
        let mut body = vec![code];
        put_str(&mut body, self.detail.get(..cut).unwrap_or_default());
        seal(seq, KIND_OUTCOME, &body)
    }
}

/// Decodes a whole table-op file that must be record `seq` (from its name). Errors name
/// the offset of the field that failed; hostile bytes never panic and never allocate more
/// than they hold.
pub fn decode_table_op(bytes: &[u8], seq: u64) -> Result<TableOpRecord, DecodeError> {
    let at = |off: usize| move |r: DecodeReason| DecodeError::new(off as u64, r);
    let header = bytes
        .get(..TABLE_OP_HEADER_LEN)
        .ok_or_else(|| at(0)(DecodeReason::Truncated))?;
    let le64 = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(header.get(o..o + 8).unwrap_or(&[0; 8]));
        u64::from_le_bytes(b)
    };
    if header.get(8..12) != Some(&TABLE_OP_MAGIC[..]) {
        return Err(at(8)(DecodeReason::BadMagic));
    }
    let stored = le64(0);
    let computed = checksum(DOMAIN, bytes.get(8..).unwrap_or_default());
    if stored != computed {
        return Err(at(0)(DecodeReason::BadChecksum { stored, computed }));
    }
    let version = u16::from_le_bytes([
        header.get(12).copied().unwrap_or(0),
        header.get(13).copied().unwrap_or(0),
    ]);
    if version != TABLE_OP_VERSION {
        return Err(at(12)(DecodeReason::UnsupportedVersion(u32::from(version))));
    }
    let kind = header.get(14).copied().unwrap_or(0);
    if header.get(15).copied() != Some(0) {
        return Err(at(15)(DecodeReason::InvalidTableOp(
            "reserved byte not zero",
        )));
    }
    let found = le64(16);
    if found != seq {
        return Err(at(16)(DecodeReason::InvalidTableOp(
            "sequence number differs from the file name's",
        )));
    }
    let len = u32::from_le_bytes([
        header.get(24).copied().unwrap_or(0),
        header.get(25).copied().unwrap_or(0),
        header.get(26).copied().unwrap_or(0),
        header.get(27).copied().unwrap_or(0),
    ]);
    if len > MAX_TABLE_OP_BODY {
        return Err(at(24)(DecodeReason::PayloadTooLarge(len)));
    }
    let body = bytes.get(TABLE_OP_HEADER_LEN..).unwrap_or_default();
    if body.len() != len as usize {
        return Err(at(24)(DecodeReason::WrongLength(bytes.len())));
    }
    let mut r = Reader::new(body);
    let pos = |r: &Reader<'_>| TABLE_OP_HEADER_LEN + body.len() - r.remaining();
    let out = match kind {
        KIND_INTENT => decode_intent(&mut r).map(TableOpRecord::Intent),
        KIND_OUTCOME => decode_outcome(&mut r).map(TableOpRecord::Outcome),
        k => return Err(at(14)(DecodeReason::UnknownRecordKind(k))),
    };
    let out = out.map_err(|e| at(pos(&r))(e))?;
    let off = pos(&r);
    r.finish().map_err(at(off))?;
    Ok(out)
}

fn text(r: &mut Reader<'_>, max: u64, what: &'static str) -> Result<String, DecodeReason> {
    let len = r.varint()?;
    if len > max {
        return Err(DecodeReason::InvalidTableOp(what));
    }
    let b = r.bytes(len)?;
    String::from_utf8(b.to_vec()).map_err(|_| DecodeReason::InvalidTableOp(what))
}

fn decode_intent(r: &mut Reader<'_>) -> Result<TableOpIntent, DecodeReason> {
    let kind =
        TableOpKind::from_code(r.u8()?).ok_or(DecodeReason::InvalidTableOp("unknown operation"))?;
    let table = text(r, 128, "table name")?;
    let branch = text(r, 64, "branch name")?;
    let other = text(r, 64, "source branch name")?;
    if table.is_empty() || branch.is_empty() {
        return Err(DecodeReason::InvalidTableOp("empty table or branch name"));
    }
    if matches!(kind, TableOpKind::Create | TableOpKind::Merge) == other.is_empty() {
        return Err(DecodeReason::InvalidTableOp(
            "a source is required by create and merge, and only by them",
        ));
    }
    let timestamp = r.varint()?;
    let policy = r.u8()?;
    if policy > 3 || (policy != 0 && kind != TableOpKind::Merge) {
        return Err(DecodeReason::InvalidTableOp("conflict policy"));
    }
    let n = r.count(1)?;
    let mut partitions = Vec::with_capacity(n);
    for _ in 0..n {
        let p = r.varint()?;
        let p = u32::try_from(p).map_err(|_| DecodeReason::InvalidTableOp("partition id"))?;
        if partitions.last().is_some_and(|&last| last >= p) {
            return Err(DecodeReason::InvalidTableOp(
                "partitions not strictly increasing",
            ));
        }
        partitions.push(p);
    }
    Ok(TableOpIntent {
        kind,
        table,
        branch,
        other,
        timestamp,
        policy,
        partitions,
    })
}

fn decode_outcome(r: &mut Reader<'_>) -> Result<TableOpOutcome, DecodeReason> {
    let result = match r.u8()? {
        1 => TableOpResult::Applied,
        2 => TableOpResult::RolledBack,
        _ => return Err(DecodeReason::InvalidTableOp("unknown result")),
    };
    let detail = text(r, MAX_TABLE_OP_DETAIL as u64, "detail")?;
    Ok(TableOpOutcome { result, detail })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent() -> TableOpIntent {
        TableOpIntent {
            kind: TableOpKind::Merge,
            table: "orders".into(),
            branch: "main".into(),
            other: "feature".into(),
            timestamp: 1_700_000_000_000,
            policy: 2,
            partitions: vec![0, 1, 7],
        }
    }

    fn hex(b: &[u8]) -> String {
        b.chunks(16)
            .map(|c| {
                c.iter()
                    .map(|x| format!("{x:02x}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn golden_bytes() {
        insta::assert_snapshot!("table_op_intent", hex(&intent().encode(5)));
        let out = TableOpOutcome {
            result: TableOpResult::RolledBack,
            detail: "p1: not found".into(),
        };
        insta::assert_snapshot!("table_op_outcome", hex(&out.encode(5)));
    }

    #[test]
    fn round_trips() {
        let mut i = intent();
        assert_eq!(
            decode_table_op(&i.encode(5), 5),
            Ok(TableOpRecord::Intent(i.clone()))
        );
        i.kind = TableOpKind::Delete;
        i.other.clear();
        i.policy = 0;
        i.partitions.clear();
        assert_eq!(
            decode_table_op(&i.encode(0), 0),
            Ok(TableOpRecord::Intent(i))
        );
        let o = TableOpOutcome {
            result: TableOpResult::Applied,
            detail: String::new(),
        };
        assert_eq!(
            decode_table_op(&o.encode(u64::MAX), u64::MAX),
            Ok(TableOpRecord::Outcome(o))
        );
    }

    #[test]
    fn refuses_zeros_damage_and_other_names() {
        let reason = |b: &[u8], seq| decode_table_op(b, seq).map_err(|e| (e.offset, e.reason));
        assert_eq!(reason(&[], 0), Err((0, DecodeReason::Truncated)));
        assert_eq!(reason(&[0; 64], 0), Err((8, DecodeReason::BadMagic)));
        let good = intent().encode(5);
        // Every single-bit flip is refused.
        for i in 0..good.len() * 8 {
            let mut b = good.clone();
            b[i / 8] ^= 1 << (i % 8);
            assert!(decode_table_op(&b, 5).is_err(), "bit {i}");
        }
        // Valid bytes under another sequence number's name.
        assert!(matches!(
            reason(&good, 6),
            Err((16, DecodeReason::InvalidTableOp(_)))
        ));
        // Truncated and extended.
        for n in 0..good.len() {
            assert!(decode_table_op(&good[..n], 5).is_err(), "{n}");
        }
        let mut long = good.clone();
        long.push(0);
        assert!(decode_table_op(&long, 5).is_err());
    }

    #[test]
    fn refuses_checksummed_nonsense() {
        // Bodies a checksum-valid writer could still get wrong.
        let mut i = intent();
        i.partitions = vec![3, 3];
        assert!(matches!(
            decode_table_op(&i.encode(1), 1),
            Err(DecodeError {
                reason: DecodeReason::InvalidTableOp(_),
                ..
            })
        ));
        let mut i = intent();
        i.kind = TableOpKind::Delete;
        assert!(
            decode_table_op(&i.encode(1), 1).is_err(),
            "delete with a source"
        );
        let mut i = intent();
        i.other.clear();
        assert!(
            decode_table_op(&i.encode(1), 1).is_err(),
            "merge without a source"
        );
        // A count larger than the bytes left: refused before allocating.
        let mut body = vec![2u8];
        put_str(&mut body, "t");
        put_str(&mut body, "b");
        put_str(&mut body, "");
        varint::put(&mut body, 0);
        body.push(0);
        varint::put(&mut body, u64::MAX >> 1);
        let bytes = seal(1, KIND_INTENT, &body);
        assert!(matches!(
            decode_table_op(&bytes, 1),
            Err(DecodeError {
                reason: DecodeReason::CountTooLarge(_),
                ..
            })
        ));
        // An outcome's long detail is cut at a character boundary.
        let o = TableOpOutcome {
            result: TableOpResult::RolledBack,
            detail: "é".repeat(MAX_TABLE_OP_DETAIL),
        };
        match decode_table_op(&o.encode(2), 2) {
            Ok(TableOpRecord::Outcome(d)) => assert!(d.detail.len() <= MAX_TABLE_OP_DETAIL),
            other => panic!("{other:?}"),
        }
    }
}
