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
