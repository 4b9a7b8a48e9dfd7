//! The `paravault` binary.
fn main() {}
