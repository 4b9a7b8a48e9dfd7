//! Unit and property tests for frontmatter split/parse/render.

use super::*;
use proptest::prelude::*;

fn roundtrip(text: &str) -> String {
    let s = split(text).unwrap();
    let fm = parse(&s).unwrap();
    render(&s, &fm).unwrap()
}

#[test]
fn unchanged_parse_renders_byte_identically() {
    for text in [
        "---\ntype: Project\ntitle: 'Quoted'   # comment\n---\nbody\n",
        "\u{feff}---\r\ntype: Area\r\n---\r\nbody\r\n",
        "---\ntitle: x\n---",
        "---\n---\n",
        "---\nz: 1\na: [1, 2]\n...\nrest",
    ] {
        assert_eq!(roundtrip(text), text);
    }
}

#[test]
fn problems_are_named() {
    assert_eq!(split("no frontmatter"), Err(FrontmatterProblem::Missing));
    assert_eq!(split("---\ntitle: x\n"), Err(FrontmatterProblem::Unterminated));
    let s = split("---\n- a\n- b\n---\n").unwrap();
    assert_eq!(parse(&s), Err(FrontmatterProblem::NotAMapping { found: "list" }));
    let s = split("---\ntitle: x\n  bad: [\n---\n").unwrap();
    assert!(matches!(parse(&s), Err(FrontmatterProblem::Yaml { line, .. }) if line >= 2));
}

#[test]
fn body_line_numbers_count_the_frontmatter() {
    let s = split("---\na: 1\nb: 2\n---\nfirst body line\n").unwrap();
    assert_eq!(s.body_first_line, 5);
    assert_eq!(s.body, "first body line\n");
}

fn yaml_scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| Value::Number(n.into())),
        "[a-zA-Z0-9 :#'\"\\-_.\\[\\]{}]{0,20}".prop_map(Value::String),
        // long enough that the emitter wraps them, with bracket runs past the nesting bound
        "([a-z]{1,8} ){0,12}[\\[{]{33,40}( [a-z]{1,8}){0,12}".prop_map(Value::String),
        Just(Value::Null),
    ]
}

fn yaml_value() -> impl Strategy<Value = Value> {
    yaml_scalar().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Sequence),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| { Value::Mapping(m.into_iter().map(|(k, v)| (Value::String(k), v)).collect()) }),
        ]
    })
}

proptest! {
    /// render(mapping) then parse gives back the same mapping.
    #[test]
    fn render_then_parse_is_identity(entries in prop::collection::btree_map("[a-z_]{1,10}", yaml_value(), 0..6), body in "[a-z \n#-]{0,40}") {
        let mapping: Mapping = entries.into_iter().map(|(k, v)| (Value::String(k), v)).collect();
        let text = render_new(&Frontmatter::from_mapping(mapping.clone()).unwrap(), &body).unwrap();
        let s = split(&text).unwrap();
        let parsed = parse(&s).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
        prop_assert_eq!(&parsed.mapping, &mapping);
        prop_assert_eq!(s.body, body.as_str());
        prop_assert_eq!(render(&s, &parsed).unwrap(), text);
    }

    /// Arbitrary text never panics, and whatever parses renders back unchanged.
    #[test]
    fn arbitrary_text_never_panics(text in "(---\r?\n)?[a-z: \\[\\]{}'\"\n\r-]{0,80}(\n---\n)?[a-z\n]{0,10}") {
        if let Ok(s) = split(&text)
            && let Ok(fm) = parse(&s)
        {
            prop_assert_eq!(render(&s, &fm).unwrap(), text);
        }
    }
}

#[test]
fn unicode_whitespace_block_is_yaml_content_not_an_empty_block() {
    // Found by the fuzz seed corpus: `str::trim` took a block of U+00A0 as empty, and the
    // unchanged parse then rendered without it.
    let text = "---\n\u{a0}\n---\n";
    let s = split(text).unwrap();
    match parse(&s) {
        Ok(fm) => assert_eq!(render(&s, &fm).unwrap(), text),
        Err(problem) => assert_eq!(problem, FrontmatterProblem::NotAMapping { found: "string" }),
    }
}

#[test]
fn unrenderable_mappings_are_refused_not_emptied() {
    let s = split("---\n? {a: 1}\n: 2\n---\n").unwrap();
    let fm = parse(&s).unwrap();
    assert!(matches!(Frontmatter::from_mapping(fm.mapping.clone()), Err(FrontmatterProblem::Unrenderable { .. })));
    // The unchanged parse still renders byte-identically from its source text.
    assert_eq!(render(&s, &fm).unwrap(), "---\n? {a: 1}\n: 2\n---\n");
}

#[test]
fn a_mapping_the_emitter_would_write_unreadably_is_refused() {
    // Found by the fuzzer: a tag with an escaped flow indicator (`!%5bt` is `![t`) that
    // serde_yaml emits unescaped, giving YAML that no longer parses.
    for text in ["---\n? !%5bt k\n---\n", "---\na: !%5bt v\n---\n"] {
        let s = split(text).unwrap();
        let fm = parse(&s).unwrap();
        assert!(matches!(Frontmatter::from_mapping(fm.mapping.clone()), Err(FrontmatterProblem::Unrenderable { .. })), "{text:?}");
        assert_eq!(render(&s, &fm).unwrap(), text, "the unchanged parse still renders from its source");
    }
}

fn parse_text(text: &str) -> Result<Frontmatter, FrontmatterProblem> {
    parse(&split(text).unwrap())
}

#[test]
fn deeply_nested_flow_collections_are_refused_before_parsing() {
    // Issue 17: 100k levels of `[` took 22 s in the YAML parser; refused at once now.
    let bomb = format!("---\ntitle: {}\n---\n", "[".repeat(100_000));
    match parse_text(&bomb) {
        Err(FrontmatterProblem::Yaml { line, message }) => {
            assert_eq!(line, 2);
            assert!(message.contains("deeper than 32"), "{message}");
        }
        other => panic!("expected a nesting refusal, got {other:?}"),
    }
    let mixed = format!("---\ntags: {}x{}\n---\n", "{a: [".repeat(20), "]}".repeat(20));
    assert!(matches!(parse_text(&mixed), Err(FrontmatterProblem::Yaml { .. })));
    let compact = format!("---\nlist:\n{}x\n---\n", "- ".repeat(40));
    assert!(matches!(parse_text(&compact), Err(FrontmatterProblem::Yaml { message, .. }) if message.contains("block collections")));
}

#[test]
fn ordinary_nesting_quotes_and_comments_still_parse() {
    let text = "---\ntitle: \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[ in quotes\"\nother: '{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{'\n\
                # [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[ in a comment\ntags: [a, [b, {c: [d]}]]\nrule: ------\nlist:\n  - - a\n---\n";
    let fm = parse_text(text).unwrap();
    assert!(fm.get("tags").is_some() && fm.get("rule").is_some());
    let unbalanced = (0..40).map(|i| format!("k{i}: \"a [ b\"\n")).collect::<String>();
    assert!(parse_text(&format!("---\n{unbalanced}---\n")).is_ok(), "quoted brackets never add up");
}

#[test]
fn brackets_inside_plain_scalars_are_text_even_on_wrapped_lines() {
    // The fuzz finding `frontmatter_plain_scalar_braces`: a quoted value full of `{` parsed,
    // but once rendered plain (and wrapped by the emitter) the pre-scan refused it.
    let braces = "{".repeat(40);
    let long = format!("{} semantic {braces} tail", "word ".repeat(20));
    for value in [braces.clone(), format!("x{braces}"), long.clone()] {
        let mapping: Mapping = [(Value::String("b".into()), Value::String(value.clone()))].into_iter().collect();
        let text = render_new(&Frontmatter::from_mapping(mapping.clone()).unwrap(), "").unwrap();
        assert_eq!(parse_text(&text).unwrap().mapping, mapping, "{text}");
    }
    let in_list =
        format!("---\nlist:\n- {}\n  {braces}\n- plain {braces}\nkey: {}\n  {braces} more\n---\n", "w ".repeat(30), "v ".repeat(30));
    assert!(parse_text(&in_list).is_ok(), "{in_list}");
    // `''` inside a single-quoted scalar is a quote, not the scalar's end.
    let doubled = format!("---\na: 'it''s {braces}'\nb: '''{braces}'''\n---\n");
    assert!(parse_text(&doubled).is_ok(), "{doubled}");
}

#[test]
fn flow_collections_where_a_node_starts_still_count() {
    let bomb = "[".repeat(40);
    for text in [
        format!("---\na:\n  {bomb}\n---\n"),
        format!("---\na: x\n{bomb}\n---\n"),
        format!("---\n- a: x\n  {bomb}\n---\n"),
        format!("---\na: &anchor {bomb}\n---\n"),
        format!("---\na: x # comment\n  {bomb}\n---\n"),
        format!("---\na: [x, {bomb}\n---\n"),
    ] {
        assert!(
            matches!(parse_text(&text), Err(FrontmatterProblem::Yaml { ref message, .. }) if message.contains("deeper than 32")),
            "{text}"
        );
    }
}

#[test]
fn block_scalar_lines_are_text() {
    // A fuzz finding: the lines of a `|` / `>` block scalar were scanned as YAML.
    let braces = "{".repeat(40);
    let brackets = "[".repeat(40);
    for text in [
        format!("---\na: |-\n  {braces}\n\n  {brackets}\nb: 1\n---\n"),
        format!("---\na: >\n    {brackets}\n    x\n---\n"),
        format!("---\nlist:\n- |\n  {braces}\n- plain\n---\n"),
        format!("---\n'a:': |-\n  x {braces}\n\n\n  / [[: m]]\n---\n"),
    ] {
        assert!(parse_text(&text).is_ok(), "{text}");
    }
    // Lines that are not indented past the key end the block scalar and are YAML again.
    let ended = format!("---\na: |\n  text\n{brackets}\n---\n");
    assert!(
        matches!(parse_text(&ended), Err(FrontmatterProblem::Yaml { ref message, .. }) if message.contains("deeper than 32")),
        "{ended}"
    );
    let rendered: Mapping =
        [(Value::String("b".into()), Value::String(format!("line one\n{braces}\n{brackets} end\n")))].into_iter().collect();
    let text = render_new(&Frontmatter::from_mapping(rendered.clone()).unwrap(), "").unwrap();
    assert_eq!(parse_text(&text).unwrap().mapping, rendered, "{text}");
}

#[test]
fn an_explicit_keys_value_line_is_read_as_a_value() {
    // A fuzz finding: serde_yaml renders a long key as `? key` / `: value`, and the pre-scan
    // read the `: ` line's quoted value as a plain scalar whose brackets counted.
    let braces = "{".repeat(40);
    let long_key = "k".repeat(200);
    let mapping: Mapping = [(Value::String(long_key), Value::String(format!("title: [{braces} \"x\"")))].into_iter().collect();
    let text = render_new(&Frontmatter::from_mapping(mapping.clone()).unwrap(), "").unwrap();
    assert!(text.contains("\n? ") || text.contains("\n: "), "{text}");
    assert_eq!(parse_text(&text).unwrap().mapping, mapping, "{text}");
    let block = format!("---\n? k\n: |\n  {braces}\n---\n");
    assert!(parse_text(&block).is_ok(), "{block}");
    let bomb = format!("---\n? k\n: {}\n---\n", "[".repeat(40));
    assert!(matches!(parse_text(&bomb), Err(FrontmatterProblem::Yaml { ref message, .. }) if message.contains("deeper than 32")), "{bomb}");
}

#[test]
fn a_block_scalars_indentation_indicator_fixes_its_content_indent() {
    // A fuzz finding: serde_yaml renders a value whose first line starts with a space as `|2-`;
    // the pre-scan took the first line's deeper indent as the content's, so the next line
    // (indented exactly 2) ended the scalar and its braces counted as flow nesting.
    let braces = "{".repeat(40);
    let rendered: Mapping = [(Value::String("b".into()), Value::String(format!(" starts with a space\n{braces}")))].into_iter().collect();
    let text = render_new(&Frontmatter::from_mapping(rendered.clone()).unwrap(), "").unwrap();
    assert!(text.contains("|2-"), "{text}");
    assert_eq!(parse_text(&text).unwrap().mapping, rendered, "{text}");
    for text in [
        format!("---\na: |2-\n     deeper first\n  {braces}\n---\n"),
        format!("---\nlist:\n- >-1\n   x\n {braces}\n---\n"),
        format!("---\nm:\n  k: |+2\n      x\n    {braces}\n---\n"),
    ] {
        assert!(parse_text(&text).is_ok(), "{text}");
    }
    // Lines indented less than the indicator says end the scalar; their braces are YAML again.
    let ended = format!("---\nm:\n  k: |2\n      x\n  {braces}\n---\n");
    assert!(
        matches!(parse_text(&ended), Err(FrontmatterProblem::Yaml { ref message, .. }) if message.contains("deeper than 32")),
        "{ended}"
    );
}

#[test]
fn a_tag_or_anchor_leaves_the_place_where_a_node_starts() {
    // A fuzz finding: after a tag (`!t `) the pre-scan no longer saw a node start, so a `{` in
    // the tagged plain key counted as an unclosed flow collection and every later block
    // scalar's braces were counted too.
    let braces = "{".repeat(40);
    for text in [
        format!("---\n!au x{{y: 1\na: |-\n  {braces}\n---\n"),
        format!("---\nk: &anchor plain {braces}\n---\n"),
        format!("---\nk: !t |-\n  {braces}\n---\n"),
    ] {
        assert!(parse_text(&text).is_ok(), "{text}");
    }
    // A flow collection behind a tag or an anchor still counts.
    for property in ["!t", "&a", "!<tag:yaml.org,2002:str>"] {
        let bomb = format!("---\nk: {property} {braces}\n---\n");
        assert!(
            matches!(parse_text(&bomb), Err(FrontmatterProblem::Yaml { ref message, .. }) if message.contains("deeper than 32")),
            "{bomb}"
        );
    }
}

#[test]
fn a_value_ending_in_a_unicode_line_separator_still_closes_the_block() {
    // A fuzz finding: serde_yaml ends a literal block scalar with the value's last line break
    // as it is, here U+2028, so the rendered `---` landed on the YAML's last line and the block
    // swallowed the body.
    for end in ["\u{2028}", "\u{2029}"] {
        let value = format!("line\n-- |$#'x{end}");
        let mapping: Mapping = [(Value::String("t[x".into()), Value::String(value))].into_iter().collect();
        let body = "  ---\n  more\n---\nbody\n";
        let text = render_new(&Frontmatter::from_mapping(mapping.clone()).unwrap(), body).unwrap();
        let split = split(&text).unwrap();
        assert_eq!(split.body, body, "{text:?}");
        assert_eq!(parse(&split).unwrap().mapping, mapping, "{text:?}");
    }
}

#[test]
fn every_line_break_the_parser_knows_ends_a_line_for_the_pre_scan() {
    // libyaml also breaks lines at a lone CR, NEL, LS and PS: a flow collection after one is
    // at the start of a line, not inside the plain or block scalar before it.
    let braces = "{".repeat(40);
    for brk in ["\r", "\u{85}", "\u{2028}", "\u{2029}"] {
        for text in [format!("---\na: x{brk}{braces}\n---\n"), format!("---\na: |\n  x{brk}{braces}\n---\n")] {
            assert!(
                matches!(parse_text(&text), Err(FrontmatterProblem::Yaml { ref message, .. }) if message.contains("deeper than 32")),
                "{text:?}"
            );
        }
    }
    // CRLF is one break, and brackets in scalars stay text.
    assert!(parse_text(&format!("---\r\na: x {braces}\r\nb: |\r\n  {braces}\r\n---\r\n")).is_ok());
}

#[test]
fn a_keep_chomped_block_ending_in_a_paragraph_separator_is_refused_typed() {
    // A fuzz finding: serde_yaml writes `t: "\nt\u{2029}\u{2029}"` as `t: |2+` whose last break
    // is U+2029, with no `\n` after it; a frontmatter block must end in `\n` before `---`, and
    // under keep chomping that `\n` is one more line break of the value. Such a mapping cannot
    // be written as a frontmatter block: a typed refusal, never a different value.
    let mapping: Mapping = [(Value::String("t".into()), Value::String("\nt\u{2029}\u{2029}".into()))].into_iter().collect();
    assert!(matches!(Frontmatter::from_mapping(mapping), Err(FrontmatterProblem::Unrenderable { .. })));
}
