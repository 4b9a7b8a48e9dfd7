//! Unit tests of `markdown_fix`.

use super::fix_body;

#[test]
fn fixes_whitespace_and_markers_but_not_code() {
    let body = "text  \n- a\n* b\n```\nkeep  \n* x\n```\n";
    assert_eq!(fix_body(body), "text\n- a\n- b\n```\nkeep  \n* x\n```\n");
}
