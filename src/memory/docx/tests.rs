//! Unit tests of the .docx conversion: documents built here with stored (uncompressed) entries,
//! so each XML construct is checked on its own; the deflated fixtures are in tests/it/memory.rs.

use std::io::Write;

use super::*;

const W: &str = "http://schemas.openxmlformats.org/wordprocessingml/2006/main";

fn docx_with(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, data) in entries {
        writer.start_file(*name, options).unwrap();
        writer.write_all(data).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

fn docx(body: &str) -> Vec<u8> {
    let xml =
        format!(r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="{W}"><w:body>{body}</w:body></w:document>"#);
    docx_with(&[("[Content_Types].xml", b"<Types/>"), ("word/document.xml", xml.as_bytes())])
}

fn markdown(body: &str) -> String {
    to_markdown(&docx(body)).unwrap().markdown
}

fn para(text: &str) -> String {
    format!("<w:p><w:r><w:t xml:space=\"preserve\">{text}</w:t></w:r></w:p>")
}

#[test]
fn paragraphs_headings_and_emphasis_become_markdown() {
    let body = format!(
        "<w:p><w:pPr><w:pStyle w:val=\"Title\"/></w:pPr><w:r><w:t>Plan</w:t></w:r></w:p>\
         <w:p><w:pPr><w:pStyle w:val=\"Heading3\"/></w:pPr><w:r><w:t>Step</w:t></w:r></w:p>\
         <w:p><w:r><w:t xml:space=\"preserve\">a </w:t></w:r><w:r><w:rPr><w:b/><w:i/></w:rPr><w:t xml:space=\"preserve\">both </w:t></w:r>\
         <w:r><w:rPr><w:b w:val=\"0\"/></w:rPr><w:t>plain</w:t></w:r><w:r><w:br/><w:t>next</w:t><w:tab/><w:t>tabbed</w:t></w:r></w:p>{}",
        para("")
    );
    assert_eq!(markdown(&body), "# Plan\n\n### Step\n\na ***both*** plain\\\nnext tabbed\n");
}

#[test]
fn typed_markdown_characters_and_entities_stay_text() {
    assert_eq!(markdown(&para("# not a heading *x* [l](u) &lt;b&gt; &#x41;&amp;")), "\\# not a heading \\*x\\* \\[l\\](u) \\<b\\> A&\n");
    assert_eq!(markdown(&para("- not an item")), "\\- not an item\n");
    assert_eq!(markdown(&para("12. not a number")), "12\\. not a number\n");
}

#[test]
fn lists_and_tables_keep_their_shape() {
    let item = |level: u8, text: &str| {
        format!(
            "<w:p><w:pPr><w:numPr><w:ilvl w:val=\"{level}\"/><w:numId w:val=\"1\"/></w:numPr></w:pPr><w:r><w:t>{text}</w:t></w:r></w:p>"
        )
    };
    let cell = |text: &str| format!("<w:tc>{}</w:tc>", para(text));
    let body = format!(
        "{}{}{}<w:tbl><w:tr>{}{}</w:tr><w:tr>{}{}</w:tr></w:tbl>",
        item(0, "one"),
        item(1, "nested"),
        para("after"),
        cell("A"),
        cell("B|C"),
        cell("1"),
        cell("2")
    );
    let converted = to_markdown(&docx(&body)).unwrap();
    assert_eq!(converted.markdown, "- one\n  - nested\n\nafter\n\n| A | B\\|C |\n| --- | --- |\n| 1 | 2 |\n");
    assert_eq!((converted.report.list_items, converted.report.paragraphs, converted.report.tables), (2, 1, 1));
}

#[test]
fn drawings_field_codes_and_deletions_are_dropped_and_counted() {
    let body = "<w:p><w:r><w:t>kept</w:t></w:r><w:r><w:drawing><w:t>alt</w:t></w:drawing></w:r>\
        <w:r><w:instrText>PAGE</w:instrText></w:r><w:del><w:r><w:delText>gone</w:delText></w:r></w:del>\
        <w:hyperlink><w:r><w:t xml:space=\"preserve\"> link</w:t></w:r></w:hyperlink></w:p>";
    let converted = to_markdown(&docx(body)).unwrap();
    assert_eq!(converted.markdown, "kept link\n");
    let report = converted.report;
    assert_eq!(
        (report.images_dropped, report.field_codes_dropped, report.deleted_revisions_dropped, report.hyperlinks_kept_as_text),
        (1, 1, 1, 1)
    );
}

#[test]
fn hostile_or_unconvertible_input_is_refused_with_its_reason() {
    let refused = |bytes: &[u8], needle: &str| {
        let reason = to_markdown(bytes).unwrap_err();
        assert!(reason.contains(needle), "{reason:?} should mention {needle:?}");
    };
    refused(b"plain text", "not a .docx");
    refused(&[0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1, 0, 0], "password-protected");
    refused(&docx(&para("")), "no text");
    refused(&docx_with(&[("word/other.xml", b"<x/>")]), "not a Word document");
    refused(&docx_with(&[("word/document.xml", b"<w:document><w:body>"), ("word/vbaProject.bin", b"x")]), "macros");
    let dtd = format!("<!DOCTYPE d [<!ENTITY a \"aaaa\">]><w:document xmlns:w=\"{W}\"><w:body>{}</w:body></w:document>", para("&a;"));
    refused(&docx_with(&[("word/document.xml", dtd.as_bytes())]), "DTD");
    refused(&docx(&para("&unknown;")), "undeclared entity");
    refused(&docx("<w:p><w:r><w:t>open</w:r></w:p>"), "well-formed");
    let mut corrupt = docx(&para("some text to flip"));
    let at = corrupt.windows(4).position(|w| w == b"flip").unwrap();
    corrupt[at] = b'F';
    refused(&corrupt, "corrupt");
    let whole = docx(&para("truncated"));
    refused(&whole[..whole.len() / 2], "not a readable zip");
    let many: Vec<(String, Vec<u8>)> = (0..=MAX_ENTRIES).map(|i| (format!("f{i}"), Vec::new())).collect();
    let many: Vec<(&str, &[u8])> = many.iter().map(|(n, d)| (n.as_str(), d.as_slice())).collect();
    refused(&docx_with(&many), "entries");
}

#[test]
fn content_is_base64_of_the_file() {
    let bytes = docx(&para("hi"));
    let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
    assert_eq!(decode_content(&encoded).unwrap(), bytes);
    let wrapped: String = encoded.as_bytes().chunks(76).map(|c| format!("{}\n", String::from_utf8_lossy(c))).collect();
    assert_eq!(decode_content(&wrapped).unwrap(), bytes);
    assert_eq!(decode_content(&format!("data:application/octet-stream;base64,{encoded}")).unwrap(), bytes);
    assert!(decode_content("hello, this is text").unwrap_err().contains("base64"));
}
