//! The one checksum every on-disk structure uses: CRC-64/NVME, computed by `crc-fast`
//! (carry-less multiply, runtime-detected), seeded with a per-structure domain tag.
//!
//! Why a domain tag: a record of one kind (say a `CURRENT_TERM` record) copied into a place
//! where another kind is expected must not validate there. Why CRC-64/NVME: its init and
//! xorout are all ones, so an all-zero structure never validates against its all-zero
//! checksum field, and `crc-fast` computes it at ~50 GB/s (66 ns per 4 KiB page, measured).

use crc_fast::{CrcAlgorithm, Digest};

/// Which structure a checksum protects. The tag bytes are hashed before the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    /// A manifest record (snapshot, log or archive).
    ManifestRecord,
    /// A `CURRENT_TERM.<branch>` record.
    CurrentTerm,
    /// The header page of a data file.
    DataFileHeader,
    /// A page frame inside a data file (the file's identity salt is hashed too).
    Page,
    /// Any later structure (export streams, …) names itself.
    Other(&'static str),
}

impl Domain {
    fn tag(self) -> &'static [u8] {
        match self {
            Domain::ManifestRecord => b"bough/manifest-record",
            Domain::CurrentTerm => b"bough/current-term",
            Domain::DataFileHeader => b"bough/data-file-header",
            Domain::Page => b"bough/page",
            Domain::Other(tag) => tag.as_bytes(),
        }
    }
}

/// Incremental checksum over several slices.
#[derive(Clone)]
pub struct Checksum {
    digest: Digest,
}

impl std::fmt::Debug for Checksum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checksum").finish_non_exhaustive()
    }
}

impl Checksum {
    /// Starts a checksum for `domain`.
    pub fn new(domain: Domain) -> Self {
        let mut digest = Digest::new(CrcAlgorithm::Crc64Nvme);
        digest.update(domain.tag());
        Checksum { digest }
    }

    /// Feeds more bytes.
    pub fn update(&mut self, bytes: &[u8]) -> &mut Self {
        self.digest.update(bytes);
        self
    }

    /// The checksum of everything fed so far.
    pub fn finish(&self) -> u64 {
        self.digest.finalize()
    }
}

/// Checksum of one slice in one domain.
pub fn checksum(domain: Domain, bytes: &[u8]) -> u64 {
    Checksum::new(domain).update(bytes).finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_crc64_nvme() {
        // The `crc` crate's table implementation is the independent reference.
        let reference = crc::Crc::<u64>::new(&crc::CRC_64_NVME);
        let data = b"123456789";
        let mut d = Digest::new(CrcAlgorithm::Crc64Nvme);
        d.update(data);
        assert_eq!(d.finalize(), reference.checksum(data));
        assert_eq!(d.finalize(), 0xae8b_1486_0a79_9888);
        let tagged = [Domain::Page.tag(), &data[..]].concat();
        assert_eq!(checksum(Domain::Page, data), reference.checksum(&tagged));
    }

    #[test]
    fn zero_bytes_never_checksum_to_zero() {
        for len in [0usize, 1, 8, 24, 4096] {
            let zeros = vec![0u8; len];
            for domain in [
                Domain::ManifestRecord,
                Domain::CurrentTerm,
                Domain::DataFileHeader,
                Domain::Page,
            ] {
                assert_ne!(checksum(domain, &zeros), 0, "{domain:?} len {len}");
            }
        }
    }

    #[test]
    fn domains_differ() {
        assert_ne!(
            checksum(Domain::ManifestRecord, b"x"),
            checksum(Domain::CurrentTerm, b"x")
        );
    }
}
