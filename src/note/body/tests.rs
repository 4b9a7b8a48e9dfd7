//! Unit tests for link extraction and Markdown style checks.

use super::*;

fn targets(body: &str) -> Vec<(LinkKind, String, usize)> {
    links(body, 1).into_iter().map(|l| (l.kind, l.target, l.line)).collect()
}

#[test]
fn extracts_wikilinks_embeds_and_markdown_links() {
    let body = "See [[alpha]] and [[beta|the beta]] and [[gamma#Intro]].\n![[diagram.png]]\n[doc](../x/doc.md) [web](https://example.com) [anchor](#top) ![img](pics/a%20b.png)\n";
    assert_eq!(
        targets(body),
        vec![
            (LinkKind::Wiki, "alpha".into(), 1),
            (LinkKind::Wiki, "beta".into(), 1),
            (LinkKind::Wiki, "gamma".into(), 1),
            (LinkKind::Embed, "diagram.png".into(), 2),
            (LinkKind::Markdown, "../x/doc.md".into(), 3),
            (LinkKind::Markdown, "pics/a b.png".into(), 3),
        ]
    );
}

#[test]
fn code_is_never_scanned_for_links() {
    let body = "`[[inline]]`\n\n```md\n[[fenced]]\n```\n\n    [[indented]]\n\n[[real]]\n";
    assert_eq!(targets(body), vec![(LinkKind::Wiki, "real".into(), 9)]);
}

#[test]
fn style_findings_cover_the_four_checks() {
    let body = "# Title\n### Jump\ntext  \n- a\n* b\n```\ncode\n```\n";
    let rules: Vec<_> = style_findings(body, 1).into_iter().map(|f| (f.rule, f.line)).collect();
    assert_eq!(rules, vec![("header-jump", 2), ("trailing-whitespace", 3), ("inconsistent-list-markers", 5), ("missing-code-language", 6)]);
}

/// Pieces that start, end, hide or fake link syntax, and plain text between them.
const PIECES: &[&str] = &[
    "[",
    "]",
    "(",
    ")",
    "<",
    ">",
    "!",
    "\\",
    "`",
    "|",
    "\n",
    " ",
    "    ",
    "\t",
    "\r",
    "~~~",
    "```",
    "#",
    "- ",
    "* ",
    "_",
    "&",
    "&lt;",
    "&amp;",
    ":",
    "a",
    "b c",
    "é",
    "%20",
    ".md",
    "/",
    "[[",
    "]]",
    "http://x.org",
    "[a](<b.md>)",
    "[x y](<./y/_index.md>)",
    "[t](<../index.md>)",
    "[](<>)",
    "[q](<#top>)",
    "[w](<https://w.org>)",
    "[d](<a b(c).md>)",
    "[z](z.md)",
    "[^1]",
    "[r]: r.md",
    "![i](<i.png>)",
    "[ ] ",
    "<http://a.b>",
    "<b>",
    "\n\n",
    "\n    ",
    "— 40 notes",
    "](<",
    ">)",
    "](",
    "[e](<b&amp;c.md>)",
    "[f](<a&#62;b.md>)",
    "~~~\n[g](<g.md>)\n~~~",
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
    /// Wherever the plain reading answers, it finds the links pulldown-cmark finds, in order,
    /// on the same lines.
    #[test]
    fn plain_links_are_the_parsers_links(pieces in proptest::collection::vec(proptest::sample::select(PIECES), 0..40)) {
        let body: String = pieces.concat();
        if let Some(plain) = plain_links(&body, 3) {
            proptest::prop_assert_eq!(plain, parsed_links(&body, 3), "body {:?}", body);
        }
    }
}

/// A catalog page as the renderer writes it is read without the parser, to the links the
/// parser finds; one with names that need escapes may go to the parser, never elsewhere.
#[test]
fn a_rendered_catalog_page_is_read_plainly() {
    let page_body = |names: &[&str]| {
        let mut names = names.to_vec();
        names.sort_unstable();
        let entries = crate::catalog::render::DirEntries::new(
            "03_Resources",
            names.iter().map(|n| (*n, 3)),
            std::iter::empty(),
            150,
            &crate::catalog::render::RowMemo::default(),
        );
        let input = crate::catalog::render::DirInput { dir: "03_Resources", entries: &entries };
        let pages = crate::catalog::render::render_dir(&input, 32768).expect("render");
        crate::note::frontmatter::split(&pages[0]).expect("frontmatter").body.to_string()
    };
    let ordinary = page_body(&["topic1", "topic10", "per%cent & co", "é à", "hash#tag?q", "spaced name"]);
    let plain = plain_links(&ordinary, 12).expect("a rendered page is read plainly");
    assert_eq!(plain, parsed_links(&ordinary, 12));
    assert_eq!(plain.len(), 6 + 1, "the six folders and the parent catalog: {plain:?}");
    let hostile = page_body(&["a [b] c", "x<y>z", "back`tick", "pipe|d", "bang!"]);
    if let Some(plain) = plain_links(&hostile, 12) {
        assert_eq!(plain, parsed_links(&hostile, 12));
    }
    assert_eq!(links(&hostile, 12).len(), 5 + 1);
}
