//! Records of the store's branch registry (`tableop_<seq>[_end]`): hostile bytes decode
//! to a typed error or to a record that encodes back to exactly those bytes.
#![no_main]

use bough_manifest::{TableOpRecord, decode_table_op};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The sequence number the file name would give: the record's own (bytes 16..24) half
    // the time, so checksum-valid inputs reach the body checks.
    let seq = data
        .get(16..24)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0);
    for seq in [seq, 0] {
        if let Ok(rec) = decode_table_op(data, seq) {
            let again = match &rec {
                TableOpRecord::Intent(i) => i.encode(seq),
                TableOpRecord::Outcome(o) => o.encode(seq),
            };
            assert_eq!(again, data, "a decoded record re-encodes to its bytes");
        }
    }
});
