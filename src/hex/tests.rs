//! Unit tests of `hex`.

use super::*;

#[test]
fn encodes_every_byte_value_like_the_format_macro() {
    let bytes: Vec<u8> = (0..=255).collect();
    let expected: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(encode(&bytes), expected);
    let mut out = vec![0u8; 512];
    encode_into(&mut out, &bytes);
    assert_eq!(out, expected.as_bytes());
}

#[test]
fn sha256_of_the_empty_text_is_the_known_digest() {
    assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

#[test]
fn lower_hex_is_exactly_the_digits_the_encoder_writes() {
    let digest = sha256_hex(b"abc");
    assert!(is_lower_hex(&digest, 64));
    assert!(!is_lower_hex(&digest, 40), "the wrong length");
    assert!(!is_lower_hex(&digest.to_uppercase(), 64), "upper case is not what the encoder writes");
    assert!(!is_lower_hex(&format!("{}g", &digest[..63]), 64));
    assert!(is_lower_hex("", 0));
}

#[test]
fn decode_inverts_encode_and_refuses_anything_else() {
    let bytes: Vec<u8> = (0..=255).collect();
    assert_eq!(decode(&encode(&bytes)).unwrap(), bytes);
    assert_eq!(decode(""), Some(vec![]));
    for bad in ["a", "0g", "AB", "0x00", "ab "] {
        assert_eq!(decode(bad), None, "{bad}");
    }
}

#[test]
fn random_identifiers_have_their_length_and_differ() {
    let (a, b) = (random(16), random(16));
    assert!(is_lower_hex(&a, 32) && is_lower_hex(&b, 32), "{a} {b}");
    assert_ne!(a, b);
    assert_eq!(random(6).len(), 12);
    assert_ne!(random_bytes::<8>(), random_bytes::<8>());
}
