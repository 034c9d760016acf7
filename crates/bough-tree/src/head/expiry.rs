//! TTL: the index key of an expiring entry, and the keys whose time has passed.

use super::*;
use crate::error::TreeResult;

/// Key of a TTL-index entry: expiry (big-endian, so entries sort by time) then the key.
pub fn ttl_key(expire_at: u64, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + key.len());
    k.extend_from_slice(&expire_at.to_be_bytes());
    k.extend_from_slice(key);
    k
}

impl Head {
    /// Keys whose expiry is at or before `now_ms`, oldest first, at most `limit`.
    pub fn expired_keys(&self, now_ms: u64, limit: usize) -> TreeResult<Vec<Vec<u8>>> {
        let snap = self.snapshot();
        let mut c = btree::Cursor::seek(snap.as_ref(), snap.ttl_root, None)?;
        let mut out = Vec::new();
        while out.len() < limit {
            let Some(e) = c.next_entry(snap.as_ref())? else {
                break;
            };
            if e.key.len() < 8 {
                return Err(crate::bounds::bad_page(
                    snap.as_ref(),
                    c.leaf(),
                    "TTL index key shorter than 8 bytes",
                ));
            }
            let mut at = [0u8; 8];
            at.copy_from_slice(&e.key[..8]);
            if u64::from_be_bytes(at) > now_ms {
                break;
            }
            out.push(e.key[8..].to_vec());
        }
        Ok(out)
    }
}
