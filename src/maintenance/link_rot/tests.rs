//! Unit tests of `link_rot`.

use super::*;

#[test]
fn only_public_addresses_are_allowed() {
    for private in [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "0.0.0.0",
        "100.64.0.1",
        "192.0.2.7",
        "198.18.0.1",
        "224.0.0.1",
        "255.255.255.255",
        "240.0.0.1",
        "::1",
        "::",
        "fc00::1",
        "fd12::1",
        "fe80::1",
        "2001:db8::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "64:ff9b::a00:1",
        "2002:a00:1::",
    ] {
        assert!(!is_public(private.parse().unwrap()), "{private}");
    }
    for public in ["1.1.1.1", "93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8"] {
        assert!(is_public(public.parse().unwrap()), "{public}");
    }
}
