//! Unit tests of `checksummed`.

use super::*;

#[test]
fn a_sealed_value_reads_back_and_any_damage_is_refused_with_its_reason() {
    let value = (String::from("engine"), [7u8; 32], vec![1u64, 2, 3]);
    let bytes = encode(&value).unwrap();
    assert_eq!(decode::<(String, [u8; 32], Vec<u64>)>(&bytes).unwrap(), value);
    let mut flipped = bytes.clone();
    *flipped.last_mut().unwrap() ^= 1;
    assert_eq!(decode::<(String, [u8; 32], Vec<u64>)>(&flipped).unwrap_err(), "checksum mismatch (torn or corrupt)");
    assert_eq!(decode::<(String, [u8; 32], Vec<u64>)>(&bytes[..bytes.len() - 1]).unwrap_err(), "checksum mismatch (torn or corrupt)");
    assert_eq!(decode::<u8>(&bytes[..CHECKSUM_LEN - 1]).unwrap_err(), "shorter than its checksum");
    // A body whose checksum matches but that is not the type asked for.
    let other = encode(&1u8).unwrap();
    assert!(decode::<(String, [u8; 32], Vec<u64>)>(&other).unwrap_err().starts_with("undecodable: "));
}
