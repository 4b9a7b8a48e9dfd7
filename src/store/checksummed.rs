//! A cache file's body sealed against damage: the blake3 of the body (32 bytes), then the
//! body (postcard). Bytes whose checksum does not match (torn, damaged, edited by hand) or that
//! do not decode are refused with the reason; the caller ignores the cache and rebuilds it.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The length of the checksum before the body.
pub const CHECKSUM_LEN: usize = 32;

/// `value` in postcard behind its checksum; `None` if it cannot be encoded.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Option<Vec<u8>> {
    let body = postcard::to_stdvec(value).ok()?;
    let mut bytes = Vec::with_capacity(CHECKSUM_LEN + body.len());
    bytes.extend_from_slice(blake3::hash(&body).as_bytes());
    bytes.extend_from_slice(&body);
    Some(bytes)
}

/// The value `encode` sealed in `bytes`; the error says why it cannot be trusted.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let (checksum, body) = bytes.split_at_checked(CHECKSUM_LEN).ok_or("shorter than its checksum")?;
    if checksum != blake3::hash(body).as_bytes() {
        return Err("checksum mismatch (torn or corrupt)".into());
    }
    postcard::from_bytes(body).map_err(|e| format!("undecodable: {e}"))
}

#[cfg(test)]
mod tests;
