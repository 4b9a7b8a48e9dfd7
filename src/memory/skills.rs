//! Skills (ctxvault's skill vaults): procedures an agent can fetch and follow, one note each at
//! `<skills_folder>/<slug>.md` with the name as title, the description as OKF description (both
//! indexed by the vault's search and catalogued) and the instructions as the body.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Committed, MemoryVault, ProposedChange, ReceiptSummary, Untrusted, fresh_id};
use crate::error::{Error, Result};
use crate::note::path::VaultPath;
use crate::write::sha256_hex;

/// The `skill:` block of a skill note.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillRecord {
    pub name: String,
    pub description: String,
}

/// A skill as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub path: String,
    pub record: SkillRecord,
    pub instructions: String,
}

/// The file stem of a skill name: NFC-normalised (so `café` typed precomposed or decomposed is
/// one skill), lower case, runs of anything but letters and digits as one `-` (so "Deploy to
/// Prod" and "deploy-to-prod" are one skill).
pub(crate) fn slug(name: &str) -> Result<String> {
    use unicode_normalization::UnicodeNormalization;
    let normalised: String = name.trim().nfc().collect();
    let trimmed = normalised.as_str();
    if trimmed.is_empty() || trimmed.chars().count() > 120 || trimmed.chars().any(char::is_control) {
        return Err(Error::InvalidArgument { name: "skill_name", reason: "1-120 characters, without control characters".into() });
    }
    let mut out = String::new();
    for c in trimmed.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() {
        return Err(Error::InvalidArgument { name: "skill_name", reason: "needs at least one letter or digit".into() });
    }
    Ok(out)
}

/// `write_skill`'s answer: the skill as stored, and its receipt (or, for a caller with
/// `propose` authority, the proposal that holds it).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SkillWritten {
    /// The skill's name, trimmed.
    pub skill_name: String,
    /// Its description, trimmed.
    pub description: String,
    /// The skill note's vault path.
    pub path: String,
    /// The note's file name (ctxvault 0.8.1's name for the skill's file).
    pub filename: String,
    /// Whether an existing skill was replaced (`overwrite`).
    pub overwritten: bool,
    /// The write's receipt (absent when the change is proposed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<ReceiptSummary>,
    /// The proposal holding the change (only for a caller with `propose` authority).
    #[serde(flatten)]
    pub proposed: Option<ProposedChange>,
}

/// `read_skill`'s answer: one skill in full.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SkillRead {
    /// The skill's name.
    pub skill_name: String,
    /// What the skill is for.
    pub description: String,
    /// The procedure to follow (the note's body).
    pub instructions: String,
    /// The skill note's vault path.
    pub path: String,
    /// The SHA-256 of the note's text.
    pub sha256: String,
    /// The same skill under ctxvault 0.8.1's field names.
    pub skill: PeerSkill,
}

/// A skill as ctxvault 0.8.1 names its fields.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PeerSkill {
    /// The skill's name.
    pub name: String,
    /// What the skill is for.
    pub description: String,
    /// The procedure to follow.
    pub instructions: String,
    /// The skill note's vault path.
    pub path: String,
}

/// `list_skills`'s answer: every readable skill, by name.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SkillList {
    /// Each skill's name and description, ordered by name (case-insensitive).
    pub skills: Vec<SkillSummary>,
    /// How many skills are listed.
    pub count: usize,
    /// Notes of the skills folder that are not readable skill notes.
    pub unreadable_notes: Vec<String>,
    /// The untrusted-data marks (skill text is note text).
    #[serde(flatten)]
    pub untrusted: Untrusted,
}

/// One skill of `list_skills`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SkillSummary {
    /// The skill's name (what read_skill takes).
    pub skill_name: String,
    /// What the skill is for.
    pub description: String,
}

fn render(note_type: &str, record: &SkillRecord, instructions: &str, now: chrono::DateTime<chrono::Utc>) -> Result<String> {
    let body = format!("\n{instructions}\n");
    let block = super::frontmatter_block("skill", record, "skill")?;
    let quote = crate::note::yaml_edit::quoted;
    let description: String = record.description.split_whitespace().collect::<Vec<_>>().join(" ");
    Ok(format!(
        "---\ntype: {}\ntitle: {}\ndescription: {}\ntags: [\"skill\"]\nokf_version: \"0.2\"\nmemory:\n  kind: procedural\n  sources: [\"paravault://mcp/ctxvault/write_skill\"]\n  evidence: [{}]\n  write_policy: agent-proposed\n{block}timestamp: {}\n---\n{body}",
        quote(note_type),
        quote(record.name.trim()),
        quote(&description),
        quote(&format!("sha256:{}", sha256_hex(body.as_bytes()))),
        now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    ))
}

fn parse(path: &str, text: &str) -> Option<Skill> {
    let split = crate::note::frontmatter::split(text).ok()?;
    #[derive(Deserialize)]
    struct Front {
        skill: SkillRecord,
    }
    let front: Front = serde_yaml::from_str(split.yaml).ok()?;
    let body = split.body.strip_prefix('\n').unwrap_or(split.body);
    let body = body.strip_suffix('\n').unwrap_or(body);
    Some(Skill { path: path.to_string(), record: front.skill, instructions: body.to_string() })
}

impl MemoryVault {
    fn skill_path(&self, name: &str) -> Result<VaultPath> {
        let folder = self.vault.policy().policy.agent_memory.skills_folder.trim_end_matches('/').to_string();
        VaultPath::parse(&format!("{folder}/{}.md", slug(name)?))
    }

    fn read_skill_note(&self, path: &VaultPath) -> Result<Option<(Skill, String)>> {
        let Some(bytes) = crate::store::beneath::read(self.vault.root(), path.as_str())? else { return Ok(None) };
        let text = String::from_utf8(bytes).map_err(|_| Error::NoteUnreadable { path: path.to_string(), reason: "not UTF-8".into() })?;
        let skill = parse(path.as_str(), &text).ok_or_else(|| Error::NoteUnreadable {
            path: path.to_string(),
            reason: "not a readable skill note (no skill: block)".into(),
        })?;
        Ok(Some((skill, sha256_hex(text.as_bytes()))))
    }

    /// `write_skill`: creates a skill; an existing one is replaced only with `overwrite`.
    pub fn write_skill(&self, name: &str, description: &str, instructions: &str, overwrite: bool) -> Result<SkillWritten> {
        for (field, value) in [("description", description), ("instructions", instructions)] {
            if value.trim().is_empty() {
                return Err(Error::InvalidArgument {
                    name: if field == "description" { "description" } else { "instructions" },
                    reason: "must not be empty".into(),
                });
            }
        }
        if description.chars().count() > 1000 {
            return Err(Error::InvalidArgument { name: "description", reason: "at most 1000 characters".into() });
        }
        let path = self.skill_path(name)?;
        let existing = crate::store::beneath::read(self.vault.root(), path.as_str())?.map(|bytes| sha256_hex(&bytes));
        if existing.is_some() && !overwrite {
            return Err(Error::AlreadyExists { path: path.to_string() });
        }
        let name: String = unicode_normalization::UnicodeNormalization::nfc(name.trim()).collect();
        let record = SkillRecord { name, description: description.trim().to_string() };
        let text = render(&self.vault.policy().policy.agent_memory.skill_note_type, &record, instructions, self.vault.now())?;
        let committed = self.commit("ctxvault.write_skill", &fresh_id(16), vec![(path.clone(), text, existing.clone())])?;
        let (receipt, proposed) = match committed {
            Committed::Written(receipt) => (Some(ReceiptSummary::of(&receipt)), None),
            Committed::Proposed(proposal) => (None, Some(proposal)),
        };
        let filename = path.as_str().rsplit('/').next().unwrap_or(path.as_str()).to_string();
        Ok(SkillWritten {
            skill_name: record.name,
            description: record.description,
            path: path.to_string(),
            filename,
            overwritten: existing.is_some(),
            receipt,
            proposed,
        })
    }

    /// `read_skill`: name, description and full instructions.
    pub(crate) fn read_skill(&self, name: &str) -> Result<SkillRead> {
        let path = self.skill_path(name).map_err(|_| Error::SkillNotFound { skill_name: name.chars().take(120).collect() })?;
        let (skill, sha) =
            self.read_skill_note(&path)?.ok_or_else(|| Error::SkillNotFound { skill_name: name.chars().take(120).collect() })?;
        let skill_view = PeerSkill {
            name: skill.record.name.clone(),
            description: skill.record.description.clone(),
            instructions: skill.instructions.clone(),
            path: skill.path.clone(),
        };
        Ok(SkillRead {
            skill_name: skill.record.name,
            description: skill.record.description,
            instructions: skill.instructions,
            path: skill.path,
            sha256: sha,
            skill: skill_view,
        })
    }

    /// `list_skills`: every skill's name and description, by name.
    pub(crate) fn list_skills(&self) -> Result<SkillList> {
        let folder = self.vault.policy().policy.agent_memory.skills_folder.trim_end_matches('/').to_string();
        let paths: Vec<VaultPath> =
            self.vault.with_inventory(|inv| inv.subtree(&folder).filter(|r| r.is_note()).map(|r| r.path.clone()).collect())?;
        let mut skills = Vec::new();
        let mut unreadable = Vec::new();
        for path in paths {
            match self.read_skill_note(&path) {
                Ok(Some((skill, _))) => skills.push(skill),
                Ok(None) => {}
                Err(_) => unreadable.push(path.to_string()),
            }
        }
        skills.sort_by_key(|s| s.record.name.to_lowercase());
        Ok(SkillList {
            count: skills.len(),
            skills: skills.into_iter().map(|s| SkillSummary { skill_name: s.record.name, description: s.record.description }).collect(),
            unreadable_notes: unreadable,
            untrusted: Untrusted::marks(),
        })
    }
}
