//! Seeds and a small deterministic generator: every randomized run derives everything from
//! one root seed, prints it, and replays from it (`--seed N` or `BOUGH_SEED=N`).

use std::time::{SystemTime, UNIX_EPOCH};

/// The environment variable that replays a seed.
pub const SEED_ENV: &str = "BOUGH_SEED";

/// SplitMix64: tiny, fast, seedable; plenty for choosing workloads and faults.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// A generator for one named stream of a root seed (so streams do not overlap).
    pub fn derive(seed: u64, parts: &[u64]) -> Self {
        Rng(mix(seed, parts))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// Uniform in `lo..hi` (`lo` when the range is empty).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo))
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            return None;
        }
        items.get(self.below(items.len() as u64) as usize)
    }
}

/// Mixes a seed with stream identifiers into a new seed.
pub fn mix(seed: u64, parts: &[u64]) -> u64 {
    let mut r = Rng(seed ^ 0xA076_1D64_78BD_642F);
    let mut h = r.next_u64();
    for &p in parts {
        r = Rng(h ^ p.wrapping_mul(0xE703_7ED1_A0B4_28DB));
        h = r.next_u64();
    }
    h
}

/// The seed of a run: `BOUGH_SEED` if set (decimal or `0x` hex), otherwise fresh from the
/// clock. Returns the seed and where it came from.
pub fn seed_from_env() -> Result<(u64, &'static str), String> {
    match std::env::var(SEED_ENV) {
        Ok(v) => parse_seed(&v).map(|s| (s, "BOUGH_SEED")),
        Err(_) => Ok((fresh_seed(), "fresh")),
    }
}

/// Parses a seed written in decimal or `0x` hexadecimal.
pub fn parse_seed(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let parsed = match t.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => t.parse(),
    };
    parsed.map_err(|_| format!("{text:?} is not a seed (a u64, decimal or 0x hex)"))
}

/// A seed nobody chose: the clock's nanoseconds mixed with the process id.
pub fn fresh_seed() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    mix(nanos, &[u64::from(std::process::id())])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_deterministic_and_distinct() {
        let a: Vec<u64> = (0..4).map(|_| Rng::derive(7, &[1]).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(
            Rng::derive(7, &[1]).next_u64(),
            Rng::derive(7, &[2]).next_u64()
        );
        assert_eq!(parse_seed("0x10"), Ok(16));
        assert_eq!(parse_seed(" 42 "), Ok(42));
        assert!(parse_seed("x").is_err());
    }
}
