//! Lower-case hexadecimal: the one encoder of digests and random identifiers (a leaf module).

use sha2::{Digest, Sha256};

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Writes `bytes` as lower-case hex into `out`, which holds exactly two digits per byte.
pub fn encode_into(out: &mut [u8], bytes: &[u8]) {
    debug_assert_eq!(out.len(), bytes.len() * 2);
    for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 15)];
    }
}

/// `bytes` as lower-case hex.
pub fn encode(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// The bytes of lower-case hex `s`; `None` for anything else (odd length, other characters).
pub fn decode(s: &str) -> Option<Vec<u8>> {
    let digit = |b: u8| DIGITS.iter().position(|d| *d == b).and_then(|v| u8::try_from(v).ok());
    if !s.len().is_multiple_of(2) {
        return None;
    }
    s.as_bytes().chunks_exact(2).map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?)).collect()
}

/// Whether `s` is exactly `digits` lower-case hex digits (a pinned commit or a sha256).
pub fn is_lower_hex(s: &str, digits: usize) -> bool {
    s.len() == digits && s.bytes().all(|b| DIGITS.contains(&b))
}

/// `N` unpredictable bytes from the operating system's random source. Should that source fail
/// (it does not on Linux ≥ 3.17), the bytes come from hashing this machine's clock, the process
/// id and a counter, which is still unique per call within a machine.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    if getrandom::fill(&mut out).is_err() {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let mut hasher = blake3::Hasher::new();
        hasher.update(&crate::clock::machine_nanos().to_le_bytes());
        hasher.update(&std::process::id().to_le_bytes());
        hasher.update(&COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
        hasher.finalize_xof().fill(&mut out);
    }
    out
}

/// A random identifier of `bytes` bytes (at most 32) as `2 × bytes` lower-case hex digits: the
/// one generator of temporary names, nonces and record ids.
pub fn random(bytes: usize) -> String {
    let drawn = random_bytes::<32>();
    encode(&drawn[..bytes.min(32)])
}

/// The sha256 of `bytes` as 64 lower-case hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    encode(&Sha256::digest(bytes))
}

#[cfg(test)]
mod tests;
