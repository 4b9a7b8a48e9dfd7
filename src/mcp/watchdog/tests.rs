//! Unit tests of `watchdog`.

use super::*;

#[test]
fn reads_the_parent_pid() {
    let ppid = current_ppid().expect("/proc/self/stat is readable on Linux");
    assert!(ppid > 0);
    assert_eq!(read_once(Some(ppid), None), Reading::Alive);
    assert_eq!(read_once(Some(ppid.wrapping_add(1)), None), Reading::Gone("reparented"));
    assert_eq!(read_once(Some(ppid), Some(u32::MAX - 1)), Reading::Gone("parent_pid_exited"));
}
