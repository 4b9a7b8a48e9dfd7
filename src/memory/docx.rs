//! `.docx` to Markdown for `write_doc`: the caller sends the file's bytes as base64 (the seed
//! types `content` as a string), and the main document part becomes the document note's body.
//!
//! What is kept: paragraphs, headings (`Title`, `Heading1`-`Heading6`), list items (numbered or
//! styled as lists, rendered as bullets), bold and italic runs, line breaks, tables (as Markdown
//! tables; a nested table's text joins its cell). What is dropped is counted in the report:
//! images and other drawings, hyperlink targets (their text is kept), field codes, deleted
//! revisions; headers, footers, footnotes and comments live in other parts and are not read.
//! Text is escaped, so a `*` or `#` typed in Word stays text.
//!
//! Hostile input is refused with a reason, before anything is written: not base64, not a zip,
//! an OLE file (a password-protected .docx or a legacy .doc), encrypted entries, macros
//! (`vbaProject.bin`), a DTD, unknown entities, more than [`MAX_ENTRIES`] entries, more than
//! [`MAX_DOCX_BYTES`] of input, entries that declare more than [`MAX_EXPANDED_BYTES`] together,
//! a document part that inflates past [`MAX_PART_BYTES`] whatever its header says (a zip bomb),
//! a CRC mismatch, or no text at all. Only the document part is ever inflated.
//!
//! The zip crate reads the container without its decompression features (they would rebuild
//! candle, which shares it); the one deflated part is inflated with flate2, already a
//! dependency, its CRC checked with crc32fast.

use std::io::{Cursor, Read};

use base64::Engine;
use quick_xml::events::{BytesStart, Event};
use serde::Serialize;

/// The most bytes a `.docx` may have (after base64 decoding).
pub(crate) const MAX_DOCX_BYTES: usize = 8 << 20;
/// The most entries its zip may hold.
pub(crate) const MAX_ENTRIES: usize = 2_000;
/// The most bytes all entries may declare together once inflated.
pub(crate) const MAX_EXPANDED_BYTES: u64 = 256 << 20;
/// The most bytes `word/document.xml` may inflate to.
pub(crate) const MAX_PART_BYTES: u64 = 16 << 20;

const OLE_SIGNATURE: [u8; 8] = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];
const DOCUMENT_PART: &str = "word/document.xml";

/// What the conversion kept and dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ConversionReport {
    /// Size of the .docx file the caller sent.
    pub source_bytes: usize,
    /// Paragraphs kept.
    pub paragraphs: usize,
    /// Of them, headings.
    pub headings: usize,
    /// Of them, list items.
    pub list_items: usize,
    /// Tables kept (as Markdown tables).
    pub tables: usize,
    /// Images left out.
    pub images_dropped: usize,
    /// Hyperlinks kept as their text only.
    pub hyperlinks_kept_as_text: usize,
    /// Field codes left out.
    pub field_codes_dropped: usize,
    /// Deleted tracked revisions left out.
    pub deleted_revisions_dropped: usize,
}

/// A converted document: its Markdown and the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Conversion {
    pub markdown: String,
    pub report: ConversionReport,
}

/// Decodes `content` (standard base64; whitespace and a `data:…;base64,` prefix allowed).
pub(crate) fn decode_content(content: &str) -> Result<Vec<u8>, String> {
    let trimmed = content.trim();
    let payload = match trimmed.strip_prefix("data:") {
        Some(rest) => rest.split_once(";base64,").map(|(_, data)| data).ok_or("a data: URL without ';base64,'")?,
        None => trimmed,
    };
    let compact: String = payload.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    if compact.len() / 4 * 3 > MAX_DOCX_BYTES + 3 {
        return Err(format!("a .docx may have at most {MAX_DOCX_BYTES} bytes"));
    }
    base64::engine::general_purpose::STANDARD.decode(compact.as_bytes()).map_err(|e| {
        format!("for a .docx, content must be the file's bytes in base64 (ctxvault's content is a string), and this is not base64: {e}")
    })
}

/// Converts the bytes of a `.docx` to Markdown; the error is the reason it cannot be.
pub(crate) fn to_markdown(bytes: &[u8]) -> Result<Conversion, String> {
    if bytes.len() > MAX_DOCX_BYTES {
        return Err(format!("a .docx may have at most {MAX_DOCX_BYTES} bytes; this one has {}", bytes.len()));
    }
    if bytes.starts_with(&OLE_SIGNATURE) {
        return Err("this is an OLE compound file: a password-protected .docx or a legacy .doc; save it as an unprotected .docx".into());
    }
    if !bytes.starts_with(b"PK\x03\x04") {
        return Err("this is not a .docx (a .docx is a zip archive)".into());
    }
    let xml = document_part(bytes)?;
    let mut conversion = convert(&xml)?;
    conversion.report.source_bytes = bytes.len();
    if conversion.markdown.trim().is_empty() {
        return Err("the document holds no text to store".into());
    }
    Ok(conversion)
}

/// Checks the whole archive and returns the inflated, CRC-checked main document part.
fn document_part(bytes: &[u8]) -> Result<String, String> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| format!("not a readable zip archive: {e}"))?;
    if archive.len() > MAX_ENTRIES {
        return Err(format!("the archive holds {} entries; at most {MAX_ENTRIES} are read", archive.len()));
    }
    let mut declared: u64 = 0;
    let mut document_index = None;
    for index in 0..archive.len() {
        let entry = archive.by_index_raw(index).map_err(|e| format!("entry {index} is unreadable: {e}"))?;
        let name = entry.name().map_err(|e| format!("entry {index} has an unreadable name: {e}"))?.to_string();
        if entry.encrypted() {
            return Err(format!("entry '{name}' is encrypted; save the document without a password"));
        }
        if name.rsplit('/').next().is_some_and(|file| file.eq_ignore_ascii_case("vbaProject.bin")) {
            return Err("the document holds macros (vbaProject.bin); macro-enabled documents are refused".into());
        }
        declared = declared.saturating_add(entry.size());
        if declared > MAX_EXPANDED_BYTES {
            return Err(format!("the entries declare more than {MAX_EXPANDED_BYTES} bytes once inflated"));
        }
        if name == DOCUMENT_PART {
            document_index = Some(index);
        }
    }
    let index = document_index.ok_or_else(|| format!("no {DOCUMENT_PART}: this is not a Word document"))?;
    let entry = archive.by_index_raw(index).map_err(|e| format!("{DOCUMENT_PART} is unreadable: {e}"))?;
    if entry.size() > MAX_PART_BYTES {
        return Err(format!("{DOCUMENT_PART} declares {} bytes; at most {MAX_PART_BYTES} are read", entry.size()));
    }
    let (expected_crc, expected_size) = (entry.crc32(), entry.size());
    let method = entry.compression();
    let mut inflated = Vec::new();
    let limit = MAX_PART_BYTES + 1;
    let read = match method {
        zip::CompressionMethod::Stored => entry.take(limit).read_to_end(&mut inflated),
        // `DEFLATE` names method 8 whether or not the zip crate was built to inflate it.
        deflate if deflate == zip::CompressionMethod::DEFLATE => {
            flate2::read::DeflateDecoder::new(entry).take(limit).read_to_end(&mut inflated)
        }
        other => return Err(format!("{DOCUMENT_PART} is compressed with {other:?}, which is not read (Word writes deflate)")),
    };
    read.map_err(|e| format!("{DOCUMENT_PART} does not inflate: {e}"))?;
    if inflated.len() as u64 > MAX_PART_BYTES {
        return Err(format!("{DOCUMENT_PART} inflates past {MAX_PART_BYTES} bytes (a zip bomb?)"));
    }
    if inflated.len() as u64 != expected_size || crc32fast::hash(&inflated) != expected_crc {
        return Err(format!("{DOCUMENT_PART} is corrupt (its size or CRC does not match the archive's record)"));
    }
    String::from_utf8(inflated).map_err(|_| format!("{DOCUMENT_PART} is not UTF-8"))
}

/// Markdown-escapes text typed in the document.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '#') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Escapes what would open a block at the start of a line (`-`, `+`, `1.`, `1)`, `=`).
fn escape_line_start(text: String) -> String {
    let digits = text.chars().take_while(char::is_ascii_digit).count();
    let after_digits = text[digits..].chars().next();
    if text.starts_with(['-', '+', '=']) {
        format!("\\{text}")
    } else if digits > 0 && matches!(after_digits, Some('.' | ')')) {
        format!("{}\\{}", &text[..digits], &text[digits..])
    } else {
        text
    }
}

fn attribute(element: &BytesStart<'_>, local: &[u8]) -> Option<String> {
    element
        .attributes()
        .flatten()
        .find(|a| a.key.local_name().as_ref() == local)
        .and_then(|a| a.unescape_value().ok().map(|v| v.into_owned()))
}

/// Whether a toggle property (`<w:b/>`, `<w:i w:val="0"/>`) is on.
fn toggle_on(element: &BytesStart<'_>) -> bool {
    !matches!(attribute(element, b"val").as_deref(), Some("0" | "false" | "off" | "none"))
}

#[derive(Default)]
struct Run {
    text: String,
    bold: bool,
    italic: bool,
}

impl Run {
    /// The run as Markdown: emphasis around the text, its outer spaces outside the markers.
    fn render(&self) -> String {
        let core = self.text.trim_matches(' ');
        if core.is_empty() || !(self.bold || self.italic) {
            return self.text.clone();
        }
        let lead = &self.text[..self.text.len() - self.text.trim_start_matches(' ').len()];
        let trail = &self.text[self.text.trim_end_matches(' ').len()..];
        let marker = match (self.bold, self.italic) {
            (true, true) => "***",
            (true, false) => "**",
            _ => "*",
        };
        format!("{lead}{marker}{core}{marker}{trail}")
    }
}

#[derive(Default)]
struct Paragraph {
    text: String,
    heading: Option<usize>,
    list_level: Option<usize>,
}

#[derive(Default)]
struct Converter {
    blocks: Vec<String>,
    /// Whether the last block was a list item (consecutive items are one list).
    last_was_item: bool,
    paragraph: Option<Paragraph>,
    run: Option<Run>,
    in_text: bool,
    in_run_properties: bool,
    in_paragraph_properties: bool,
    /// Inside `w:drawing`, `w:pict` or `w:object`: nothing is text.
    in_drawing: usize,
    /// Tables: the rows of the outermost one; nested tables add to its current cell.
    table_depth: usize,
    rows: Vec<Vec<String>>,
    cell: Option<String>,
    report: ConversionReport,
}

impl Converter {
    fn start(&mut self, element: &BytesStart<'_>, empty: bool) {
        match element.local_name().as_ref() {
            b"p" => self.paragraph = Some(Paragraph::default()),
            b"pPr" if !empty => self.in_paragraph_properties = true,
            b"pStyle" if self.in_paragraph_properties => {
                let style = attribute(element, b"val").unwrap_or_default();
                let paragraph = self.paragraph.get_or_insert_with(Paragraph::default);
                let lower = style.to_ascii_lowercase();
                if lower == "title" {
                    paragraph.heading = Some(1);
                } else if let Some(level) = lower.strip_prefix("heading").and_then(|n| n.trim().parse::<usize>().ok()) {
                    paragraph.heading = Some(level.clamp(1, 6));
                } else if lower.starts_with("list") && paragraph.list_level.is_none() {
                    let level = lower.chars().last().and_then(|c| c.to_digit(10)).map_or(0, |d| d.saturating_sub(1) as usize);
                    paragraph.list_level = Some(level);
                }
            }
            b"ilvl" if self.in_paragraph_properties => {
                let level = attribute(element, b"val").and_then(|v| v.parse::<usize>().ok()).unwrap_or(0).min(8);
                self.paragraph.get_or_insert_with(Paragraph::default).list_level = Some(level);
            }
            b"numPr" if self.in_paragraph_properties => {
                let paragraph = self.paragraph.get_or_insert_with(Paragraph::default);
                paragraph.list_level.get_or_insert(0);
            }
            b"r" if !empty => self.run = Some(Run::default()),
            b"rPr" if !empty => self.in_run_properties = true,
            b"b" if self.in_run_properties => {
                if let Some(run) = &mut self.run {
                    run.bold = toggle_on(element);
                }
            }
            b"i" if self.in_run_properties => {
                if let Some(run) = &mut self.run {
                    run.italic = toggle_on(element);
                }
            }
            b"t" if !empty && self.in_drawing == 0 => self.in_text = true,
            b"tab" if !self.in_paragraph_properties => self.push_text(" "),
            b"br" | b"cr" if attribute(element, b"type").is_none_or(|t| t == "textWrapping") => self.push_text("\n"),
            b"noBreakHyphen" => self.push_text("-"),
            b"drawing" | b"pict" | b"object" => {
                if self.in_drawing == 0 {
                    self.report.images_dropped += 1;
                }
                if !empty {
                    self.in_drawing += 1;
                }
            }
            b"hyperlink" => self.report.hyperlinks_kept_as_text += 1,
            b"instrText" => self.report.field_codes_dropped += 1,
            b"delText" => self.report.deleted_revisions_dropped += 1,
            b"tbl" if !empty => {
                self.table_depth += 1;
                if self.table_depth == 1 {
                    self.flush_paragraph();
                    self.rows.clear();
                }
            }
            b"tr" if !empty && self.table_depth == 1 => self.rows.push(Vec::new()),
            b"tc" if !empty && self.table_depth == 1 => self.cell = Some(String::new()),
            _ => {}
        }
    }

    fn end(&mut self, local: &[u8]) {
        match local {
            b"p" => self.flush_paragraph(),
            b"pPr" => self.in_paragraph_properties = false,
            b"rPr" => self.in_run_properties = false,
            b"r" => {
                if let Some(run) = self.run.take()
                    && let Some(paragraph) = &mut self.paragraph
                {
                    paragraph.text.push_str(&run.render());
                }
            }
            b"t" => self.in_text = false,
            b"drawing" | b"pict" | b"object" => self.in_drawing = self.in_drawing.saturating_sub(1),
            b"tc" if self.table_depth == 1 => {
                if let (Some(cell), Some(row)) = (self.cell.take(), self.rows.last_mut()) {
                    row.push(cell);
                }
            }
            b"tbl" => {
                if self.table_depth == 1 {
                    self.flush_table();
                }
                self.table_depth = self.table_depth.saturating_sub(1);
            }
            _ => {}
        }
    }

    /// Text of a `w:t` (escaped) or a break/tab, into the current run.
    fn push_text(&mut self, text: &str) {
        if self.in_drawing > 0 {
            return;
        }
        let escaped = if text == "\n" { "\n".to_string() } else { escape(text) };
        match (&mut self.run, &mut self.paragraph) {
            (Some(run), _) => run.text.push_str(&escaped),
            (None, Some(paragraph)) => paragraph.text.push_str(&escaped),
            (None, None) => {}
        }
    }

    fn flush_paragraph(&mut self) {
        let Some(paragraph) = self.paragraph.take() else { return };
        let text = paragraph.text.trim().to_string();
        if text.is_empty() {
            return;
        }
        if let Some(cell) = &mut self.cell {
            if !cell.is_empty() {
                cell.push_str("<br>");
            }
            cell.push_str(&text.replace('\n', "<br>"));
            return;
        }
        let (block, is_item) = match (paragraph.heading, paragraph.list_level) {
            (Some(level), _) => {
                self.report.headings += 1;
                (format!("{} {}", "#".repeat(level), text.replace('\n', " ")), false)
            }
            (None, Some(level)) => {
                self.report.list_items += 1;
                (format!("{}- {}", "  ".repeat(level), escape_line_start(text).replace('\n', "\\\n")), true)
            }
            (None, None) => {
                self.report.paragraphs += 1;
                (escape_line_start(text).replace('\n', "\\\n"), false)
            }
        };
        if is_item && self.last_was_item {
            if let Some(last) = self.blocks.last_mut() {
                last.push('\n');
                last.push_str(&block);
            }
        } else {
            self.blocks.push(block);
        }
        self.last_was_item = is_item;
    }

    fn flush_table(&mut self) {
        let rows: Vec<Vec<String>> = std::mem::take(&mut self.rows).into_iter().filter(|r| !r.is_empty()).collect();
        let width = rows.iter().map(Vec::len).max().unwrap_or(0);
        if width == 0 {
            return;
        }
        self.report.tables += 1;
        let line = |row: &[String]| {
            let cells: Vec<String> = (0..width).map(|i| row.get(i).cloned().unwrap_or_default()).collect();
            format!("| {} |", cells.join(" | "))
        };
        let mut lines = vec![line(&rows[0]), format!("|{}", " --- |".repeat(width))];
        lines.extend(rows[1..].iter().map(|r| line(r)));
        self.blocks.push(lines.join("\n"));
        self.last_was_item = false;
    }
}

/// Converts `word/document.xml` to Markdown.
fn convert(xml: &str) -> Result<Conversion, String> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut converter = Converter::default();
    loop {
        let event = reader.read_event().map_err(|e| format!("{DOCUMENT_PART} is not well-formed XML: {e}"))?;
        match event {
            Event::Start(element) => converter.start(&element, false),
            Event::Empty(element) => {
                converter.start(&element, true);
                converter.end(element.local_name().as_ref());
            }
            Event::End(element) => converter.end(element.local_name().as_ref()),
            Event::Text(text) if converter.in_text => {
                let decoded = text.xml_content().map_err(|e| format!("{DOCUMENT_PART} has undecodable text: {e}"))?;
                converter.push_text(&decoded);
            }
            Event::CData(text) if converter.in_text => {
                let decoded = text.decode().map_err(|e| format!("{DOCUMENT_PART} has undecodable text: {e}"))?;
                converter.push_text(&decoded);
            }
            Event::GeneralRef(reference) => {
                let resolved = match reference.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    Ok(None) => {
                        let name = reference.decode().map_err(|e| format!("{DOCUMENT_PART} has an undecodable entity: {e}"))?;
                        quick_xml::escape::resolve_predefined_entity(&name)
                            .ok_or_else(|| format!("{DOCUMENT_PART} uses the undeclared entity &{name};"))?
                            .to_string()
                    }
                    Err(e) => return Err(format!("{DOCUMENT_PART} has a bad character reference: {e}")),
                };
                if converter.in_text {
                    converter.push_text(&resolved);
                }
            }
            Event::DocType(_) => return Err(format!("{DOCUMENT_PART} declares a DTD, which Word never writes; refused")),
            Event::Eof => break,
            _ => {}
        }
    }
    converter.flush_paragraph();
    let markdown = if converter.blocks.is_empty() { String::new() } else { format!("{}\n", converter.blocks.join("\n\n")) };
    Ok(Conversion { markdown, report: converter.report })
}

#[cfg(test)]
mod tests;
