//! `check_markdown_tool` with `fix`: removes trailing whitespace and makes list markers
//! consistent (the first marker seen at each indent wins), through the write transaction.
//! Only the body is touched; frontmatter bytes stay as they are.

use serde::Serialize;
use serde_json::Value;

use crate::approvals::Operation;
use crate::error::{Error, Result};
use crate::note::frontmatter;
use crate::vault::{MarkdownReport, Vault};
use crate::write::{NoteChange, sha256_hex};

/// `check_markdown_tool` parameters.
#[derive(Debug, Clone, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MarkdownRequest {
    /// Apply the whitespace and list-marker fixes (needs approved=true).
    #[serde(default)]
    pub fix: bool,
    #[serde(default)]
    pub approved: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct MarkdownFixReport {
    pub report: MarkdownReport,
    pub fixed_notes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Value>,
}

/// Fixes trailing whitespace and mixed list markers in a body; code fences are left alone.
pub(crate) fn fix_body(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut in_fence = false;
    let mut markers: std::collections::BTreeMap<usize, char> = std::collections::BTreeMap::new();
    for line in body.split_inclusive('\n') {
        let (content, ending) = match line.strip_suffix("\r\n") {
            Some(c) => (c, "\r\n"),
            None => line.strip_suffix('\n').map_or((line, ""), |c| (c, "\n")),
        };
        let trimmed_start = content.trim_start();
        if trimmed_start.starts_with("```") || trimmed_start.starts_with("~~~") {
            in_fence = !in_fence;
        }
        if in_fence && !(trimmed_start.starts_with("```") || trimmed_start.starts_with("~~~")) {
            out.push_str(line);
            continue;
        }
        let mut fixed = content.trim_end_matches([' ', '\t']).to_string();
        let indent = fixed.len() - fixed.trim_start().len();
        let rest = &fixed[indent..];
        if let Some(marker) = rest.chars().next().filter(|c| matches!(c, '-' | '*' | '+'))
            && rest[1..].starts_with(' ')
        {
            let wanted = *markers.entry(indent).or_insert(marker);
            if wanted != marker {
                fixed = format!("{}{}{}", &fixed[..indent], wanted, &rest[1..]);
            }
        }
        out.push_str(&fixed);
        out.push_str(ending);
    }
    out
}

impl Vault {
    /// The Markdown report; with `fix` (and approval), applies the safe fixes.
    pub fn check_markdown_tool(&self, request: &MarkdownRequest) -> Result<MarkdownFixReport> {
        let report = self.check_markdown()?;
        if !request.fix {
            return Ok(MarkdownFixReport { report, fixed_notes: Vec::new(), receipt: None });
        }
        if !request.approved {
            return Err(Error::ApprovalRequired { operation: "check_markdown_tool fix" });
        }
        let paths: std::collections::BTreeSet<String> = report
            .findings
            .iter()
            .filter(|f| f.rule == "trailing-whitespace" || f.rule == "inconsistent-list-markers")
            .map(|f| f.path.clone())
            .collect();
        let mut changes = Vec::new();
        // Read through folder handles, each folder once for its run of notes (never by path).
        let mut cursor = crate::store::beneath::FolderCursor::new(self.root());
        for path in &paths {
            let note = crate::note::path::VaultPath::parse(path)?;
            let Ok(Some(bytes)) = cursor.read(note.as_str()) else { continue };
            let Ok(text) = String::from_utf8(bytes.clone()) else { continue };
            let fixed = match frontmatter::split(&text) {
                Ok(s) => format!("{}{}{}{}{}", if s.bom { "\u{feff}" } else { "" }, s.open, s.yaml, s.close, fix_body(s.body)),
                Err(_) => fix_body(&text),
            };
            if fixed != text {
                changes.push(NoteChange {
                    path: note,
                    content: Some(fixed),
                    require_absent: false,
                    expected_sha256: Some(sha256_hex(&bytes)),
                });
            }
        }
        let fixed_notes: Vec<String> = changes.iter().map(|c| c.path.to_string()).collect();
        let receipt = if changes.is_empty() {
            None
        } else {
            Some(super::write_governed(self, Operation::MarkdownFix, "maintenance.markdown_fix", changes, None, false)?)
        };
        Ok(MarkdownFixReport { report: self.check_markdown()?, fixed_notes, receipt })
    }
}

#[cfg(test)]
mod tests;
