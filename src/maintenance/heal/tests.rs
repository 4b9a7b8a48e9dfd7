//! Unit tests of `heal`.

use super::*;

#[test]
fn titles_come_from_file_names() {
    assert_eq!(title_from_file_name("2024-05-01_team_sync.md"), "Team Sync");
    assert_eq!(title_from_file_name("my-note.md"), "My Note");
}
