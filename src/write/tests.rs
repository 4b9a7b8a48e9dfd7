//! Unit tests of the write path's pure decisions: where an append goes.

use super::{AppendState, append_state};

#[test]
fn an_append_lands_at_the_planned_end_or_after_what_others_wrote_never_over_it() {
    let text = "- entry\n";
    // As planned.
    assert_eq!(append_state(b"# Log\n", 6, text), AppendState::AtPlannedEnd);
    // Our own torn append: cut and redone.
    assert_eq!(append_state(b"# Log\n- en", 6, text), AppendState::AtPlannedEnd);
    // Already in place (recovery of an applied intent), also with someone's text after it.
    assert_eq!(append_state(b"# Log\n- entry\n", 6, text), AppendState::Done);
    assert_eq!(append_state(b"# Log\n- entry\nperson\n", 6, text), AppendState::Done);
    // A person appended since the plan: our text goes after theirs; theirs is never cut.
    assert_eq!(append_state(b"# Log\nperson line\n", 6, text), AppendState::AtCurrentEnd);
    // A person shortened the file: append at its current end.
    assert_eq!(append_state(b"# L", 6, text), AppendState::AtCurrentEnd);
    // A person rewrote the file and our entry ended up last: nothing to do.
    assert_eq!(append_state(b"rewritten\n- entry\n", 6, text), AppendState::Done);
}
