//! The goals worklist note (stepstone's roadmap): its model (`Worklist`, `Goal`) and format,
//! pure, so the approval gate can tell which goal lifecycle change an edit makes whoever
//! writes it (`approvals`), and the goal service (`goals`) reads and renders it. The format: a Markdown note a person can read and edit, parsed into a
//! `Worklist` and rendered back (schema version `goals_schema: 1`; docs/goals.md).
//!
//! ```text
//! ---
//! type: Project
//! title: Project Goals
//! description: The project's goals, their dependencies and their state (paravault goals).
//! timestamp: 2026-12-02T04:40:00Z
//! goals_schema: 1
//! goals_revision: 3
//! ---
//! # Project Goals
//!
//! ## Write the parser
//!
//! - id: 3f9a2c1b7d
//! - status: open
//! - active: true
//! - group: engine
//! - depends on:
//!   - 0c41aa93e2
//! - links:
//!   - https://example.com/spec
//! - created: 2026-12-02T04:40:00.000Z
//! - updated: 2026-12-02T04:41:07.250Z
//!
//! > The description, every line quoted,
//! >
//! > blank lines included.
//! ```
//!
//! Everything between the body's first line and the first goal heading (the preamble) and
//! every frontmatter key the engine does not own is kept byte for byte. Text the format cannot
//! represent is a parse error naming its line, never dropped.

use chrono::{DateTime, SecondsFormat, Utc};

use crate::note::frontmatter;

/// A goal's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GoalStatus {
    Open,
    Done,
    Archived,
}

impl GoalStatus {
    pub fn name(self) -> &'static str {
        match self {
            GoalStatus::Open => "open",
            GoalStatus::Done => "done",
            GoalStatus::Archived => "archived",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "open" => Some(GoalStatus::Open),
            "done" => Some(GoalStatus::Done),
            "archived" => Some(GoalStatus::Archived),
            _ => None,
        }
    }
}

/// One project goal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Goal {
    pub id: String,
    pub title: String,
    pub description: Option<String>,
    pub group: Option<String>,
    pub status: GoalStatus,
    /// The single goal being worked on (it is *claimed*: never ready).
    pub active: bool,
    /// Goal IDs, in the order given.
    pub depends_on: Vec<String>,
    /// Absolute http(s) URLs, in the order given.
    pub links: Vec<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// The vault's goals in canonical order, and the worklist revision.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Worklist {
    /// Advances by one on every change the engine writes.
    pub revision: u64,
    pub goals: Vec<Goal>,
}

impl Worklist {
    pub(crate) fn position(&self, id: &str) -> Option<usize> {
        self.goals.iter().position(|g| g.id == id)
    }
}

/// A goal ID: 4-32 lowercase ASCII letters or digits.
pub(crate) fn valid_id(id: &str) -> bool {
    (4..=32).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// The canonical form of a time (RFC 3339, UTC, milliseconds), or `None` when it is not one.
pub(crate) fn parse_timestamp(text: &str) -> Option<String> {
    DateTime::parse_from_rfc3339(text.trim()).ok().map(|t| t.with_timezone(&Utc).to_rfc3339_opts(SecondsFormat::Millis, true))
}

/// The worklist schema version this engine reads and writes.
pub(crate) const SCHEMA_VERSION: u64 = 1;

/// Frontmatter keys the engine owns (rewritten on every render).
const OWNED_KEYS: [&str; 3] = ["timestamp", "goals_schema", "goals_revision"];

/// Why a worklist note could not be read, with the 1-based line it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatProblem {
    pub line: usize,
    pub message: String,
}

impl FormatProblem {
    fn at(line: usize, message: impl Into<String>) -> Self {
        FormatProblem { line, message: message.into() }
    }
}

/// The parts of a worklist note kept verbatim between renders.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NoteFrame {
    /// Frontmatter blocks (a top-level key line and its indented continuation) not owned by
    /// the engine, in order, verbatim.
    pub kept_frontmatter: Vec<String>,
    /// Body text before the first goal heading, verbatim (the `# Title` line included).
    pub preamble: String,
}

/// A new worklist's frame: OKF metadata of the given note type and a heading.
pub fn new_frame(note_type: &str) -> NoteFrame {
    NoteFrame {
        kept_frontmatter: vec![
            format!("type: {note_type}\n"),
            "title: Project Goals\n".into(),
            "description: The project's goals, their dependencies and their state (paravault goals, stepstone surface).\n".into(),
        ],
        preamble: "# Project Goals\n\n".into(),
    }
}

/// Splits YAML text into top-level blocks: a line starting at column 0 and every following
/// indented, blank or comment line.
fn yaml_blocks(yaml: &str) -> Vec<String> {
    let mut blocks: Vec<String> = Vec::new();
    for line in yaml.split_inclusive('\n') {
        let starts_block = line.chars().next().is_some_and(|c| !c.is_whitespace() && c != '#');
        match blocks.last_mut() {
            Some(last) if !starts_block => last.push_str(line),
            _ => blocks.push(line.to_string()),
        }
    }
    blocks
}

fn block_key(block: &str) -> &str {
    block.split(':').next().unwrap_or("").trim()
}

/// Parses a worklist note.
pub fn parse(text: &str) -> Result<(NoteFrame, Worklist), Vec<FormatProblem>> {
    let split = frontmatter::split(text).map_err(|p| vec![FormatProblem::at(1, p.to_string())])?;
    let parsed = frontmatter::parse(&split).map_err(|p| vec![FormatProblem::at(split.yaml_first_line, p.to_string())])?;
    let schema = parsed.get("goals_schema").and_then(serde_yaml::Value::as_u64);
    if schema != Some(SCHEMA_VERSION) {
        let found =
            parsed.get("goals_schema").map_or("absent".to_string(), |v| serde_yaml::to_string(v).unwrap_or_default().trim().to_string());
        return Err(vec![FormatProblem::at(
            split.yaml_first_line,
            format!("goals_schema must be {SCHEMA_VERSION} (found {found}); this engine reads worklist schema {SCHEMA_VERSION}"),
        )]);
    }
    let revision = match parsed.get("goals_revision") {
        None => 0,
        Some(v) => {
            v.as_u64().ok_or_else(|| vec![FormatProblem::at(split.yaml_first_line, "goals_revision must be a non-negative integer")])?
        }
    };
    let kept_frontmatter = yaml_blocks(split.yaml).into_iter().filter(|b| !OWNED_KEYS.contains(&block_key(b))).collect();
    let (preamble, goals) = parse_body(split.body, split.body_first_line)?;
    Ok((NoteFrame { kept_frontmatter, preamble }, Worklist { revision, goals }))
}

fn parse_body(body: &str, first_line: usize) -> Result<(String, Vec<Goal>), Vec<FormatProblem>> {
    let lines: Vec<&str> = body.split_inclusive('\n').collect();
    let start = lines.iter().position(|l| l.starts_with("## ")).unwrap_or(lines.len());
    let preamble: String = lines[..start].concat();
    let mut problems = Vec::new();
    let mut goals = Vec::new();
    let mut index = start;
    while index < lines.len() {
        let end = lines[index + 1..].iter().position(|l| l.starts_with("## ")).map_or(lines.len(), |p| index + 1 + p);
        match parse_goal(&lines[index..end], first_line + index) {
            Ok(goal) => goals.push(goal),
            Err(mut found) => problems.append(&mut found),
        }
        index = end;
    }
    let mut seen = std::collections::HashMap::new();
    for goal in &goals {
        if let Some(previous) = seen.insert(goal.id.clone(), goal.title.clone()) {
            problems.push(FormatProblem::at(first_line, format!("goal id {} is used twice ('{previous}' and '{}')", goal.id, goal.title)));
        }
    }
    if goals.iter().filter(|g| g.active).count() > 1 {
        problems.push(FormatProblem::at(first_line, "more than one goal is marked active: true"));
    }
    if problems.is_empty() { Ok((preamble, goals)) } else { Err(problems) }
}

fn strip_newline(line: &str) -> &str {
    line.strip_suffix('\n').unwrap_or(line)
}

fn parse_goal(lines: &[&str], first_line: usize) -> Result<Goal, Vec<FormatProblem>> {
    let mut problems = Vec::new();
    let title = strip_newline(lines[0]).strip_prefix("## ").unwrap_or("").trim().to_string();
    if title.is_empty() {
        problems.push(FormatProblem::at(first_line, "a goal heading needs a title"));
    }
    let (mut id, mut status, mut active, mut group) = (None, None, false, None);
    let (mut depends_on, mut links, mut created, mut updated) = (Vec::new(), Vec::new(), None, None);
    let mut description: Option<Vec<String>> = None;
    let mut list: Option<&str> = None;
    for (offset, raw) in lines.iter().enumerate().skip(1) {
        let number = first_line + offset;
        let line = strip_newline(raw);
        if let Some(quoted) = line.strip_prefix('>') {
            let text = quoted.strip_prefix(' ').unwrap_or(quoted);
            description.get_or_insert_with(Vec::new).push(text.to_string());
            list = None;
            continue;
        }
        if line.trim().is_empty() {
            list = None;
            continue;
        }
        if description.is_some() {
            problems
                .push(FormatProblem::at(number, "text after a goal's description must be quoted with '> ' (or start a new '## ' goal)"));
            continue;
        }
        if let Some(item) = line.strip_prefix("  - ") {
            match list {
                Some("depends on") => depends_on.push(item.trim().to_string()),
                Some("links") => links.push(item.trim().to_string()),
                _ => problems.push(FormatProblem::at(number, "a nested '  - ' item belongs under '- depends on:' or '- links:'")),
            }
            continue;
        }
        let Some((key, value)) = line.strip_prefix("- ").and_then(|f| f.split_once(':')) else {
            problems.push(FormatProblem::at(
                number,
                format!("expected a field '- key: value', a quoted description line or a new goal, found '{line}'"),
            ));
            continue;
        };
        let value = value.trim();
        list = None;
        match key.trim() {
            "id" => id = Some(value.to_string()),
            "status" => match GoalStatus::parse(value) {
                Some(s) => status = Some(s),
                None => problems.push(FormatProblem::at(number, format!("status must be open, done or archived, found '{value}'"))),
            },
            "active" => match value {
                "true" => active = true,
                "false" => active = false,
                _ => problems.push(FormatProblem::at(number, format!("active must be true or false, found '{value}'"))),
            },
            "group" => group = Some(value.to_string()).filter(|g| !g.is_empty()),
            "depends on" | "links" if value.is_empty() => list = Some(if key.trim() == "links" { "links" } else { "depends on" }),
            "depends on" | "links" => {
                problems.push(FormatProblem::at(number, format!("list the {} as '  - ' items on the following lines", key.trim())))
            }
            "created" => created = Some(value.to_string()),
            "updated" => updated = Some(value.to_string()),
            other => problems.push(FormatProblem::at(number, format!("unknown goal field '{other}'"))),
        }
    }
    let id = id.unwrap_or_else(|| {
        problems.push(FormatProblem::at(first_line, format!("goal '{title}' has no '- id:' field")));
        String::new()
    });
    if !id.is_empty() && !valid_id(&id) {
        problems.push(FormatProblem::at(first_line, format!("goal id '{id}' must be 4-32 lowercase letters or digits")));
    }
    let status = status.unwrap_or_else(|| {
        problems.push(FormatProblem::at(first_line, format!("goal '{title}' has no '- status:' field")));
        GoalStatus::Open
    });
    if active && status != GoalStatus::Open {
        problems.push(FormatProblem::at(first_line, format!("goal '{title}' is active but not open")));
    }
    let mut timestamp = |value: Option<String>, name: &str| match value.as_deref().map(parse_timestamp) {
        Some(Some(t)) => t,
        Some(None) => {
            problems.push(FormatProblem::at(first_line, format!("goal '{title}': {name} is not an RFC 3339 UTC time")));
            String::new()
        }
        None => {
            problems.push(FormatProblem::at(first_line, format!("goal '{title}' has no '- {name}:' field")));
            String::new()
        }
    };
    let created_at = timestamp(created, "created");
    let updated_at = timestamp(updated, "updated");
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Goal {
        id,
        title,
        description: description.map(|lines| lines.join("\n")),
        group,
        status,
        active,
        depends_on,
        links,
        created_at,
        updated_at,
    })
}

/// Renders a worklist note: the kept frontmatter, the engine's keys, the preamble, the goals.
pub fn render(frame: &NoteFrame, worklist: &Worklist, timestamp: &str) -> String {
    let mut out = String::from("---\n");
    for block in &frame.kept_frontmatter {
        out.push_str(block);
        if !block.ends_with('\n') {
            out.push('\n');
        }
    }
    out.push_str(&format!("timestamp: {timestamp}\ngoals_schema: {SCHEMA_VERSION}\ngoals_revision: {}\n---\n", worklist.revision));
    out.push_str(&frame.preamble);
    if !frame.preamble.is_empty() && !frame.preamble.ends_with("\n\n") {
        out.push_str(if frame.preamble.ends_with('\n') { "\n" } else { "\n\n" });
    }
    for (index, goal) in worklist.goals.iter().enumerate() {
        if index > 0 {
            out.push('\n');
        }
        render_goal(goal, &mut out);
    }
    out
}

fn render_goal(goal: &Goal, out: &mut String) {
    out.push_str(&format!("## {}\n\n- id: {}\n- status: {}\n", goal.title, goal.id, goal.status.name()));
    if goal.active {
        out.push_str("- active: true\n");
    }
    if let Some(group) = &goal.group {
        out.push_str(&format!("- group: {group}\n"));
    }
    for (name, items) in [("depends on", &goal.depends_on), ("links", &goal.links)] {
        if !items.is_empty() {
            out.push_str(&format!("- {name}:\n"));
            for item in items {
                out.push_str(&format!("  - {item}\n"));
            }
        }
    }
    out.push_str(&format!("- created: {}\n- updated: {}\n", goal.created_at, goal.updated_at));
    if let Some(description) = &goal.description {
        out.push('\n');
        for line in description.split('\n') {
            if line.is_empty() {
                out.push_str(">\n");
            } else {
                out.push_str(&format!("> {line}\n"));
            }
        }
    }
}
