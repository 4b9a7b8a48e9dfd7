//! Skills (ctxvault's skill vaults): procedures an agent can fetch and follow, one note each at
//! `<skills_folder>/<slug>.md` with the name as title, the description as OKF description (both
//! indexed by the vault's search and catalogued) and the instructions as the body.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Committed, MemoryVault, fresh_id, proposed, receipt_summary};
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

/// The file stem of a skill name: lower case, runs of anything but letters and digits as one
/// `-` (so "Deploy to Prod" and "deploy-to-prod" are one skill).
pub(crate) fn slug(name: &str) -> Result<String> {
    let trimmed = name.trim();
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
    pub fn write_skill(&self, name: &str, description: &str, instructions: &str, overwrite: bool) -> Result<Value> {
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
        let record = SkillRecord { name: name.trim().to_string(), description: description.trim().to_string() };
        let text = render(&self.vault.policy().policy.agent_memory.skill_note_type, &record, instructions, self.vault.now())?;
        let committed = self.commit("ctxvault.write_skill", &fresh_id(16), vec![(path.clone(), text, existing.clone())])?;
        let mut answer = json!({
            "skill_name": record.name, "description": record.description, "path": path.to_string(),
            "overwritten": existing.is_some(),
        });
        Ok(match committed {
            Committed::Written(receipt) => {
                answer["receipt"] = receipt_summary(&receipt);
                answer
            }
            Committed::Proposed(proposal) => proposed(answer, proposal),
        })
    }

    /// `read_skill`: name, description and full instructions.
    pub(crate) fn read_skill(&self, name: &str) -> Result<Value> {
        let path = self.skill_path(name).map_err(|_| Error::SkillNotFound { skill_name: name.chars().take(120).collect() })?;
        let (skill, sha) =
            self.read_skill_note(&path)?.ok_or_else(|| Error::SkillNotFound { skill_name: name.chars().take(120).collect() })?;
        Ok(json!({
            "skill_name": skill.record.name, "description": skill.record.description, "instructions": skill.instructions,
            "path": skill.path, "sha256": sha,
        }))
    }

    /// `list_skills`: every skill's name and description, by name.
    pub(crate) fn list_skills(&self) -> Result<Value> {
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
        Ok(super::untrusted(json!({
            "skills": skills.iter().map(|s| json!({"skill_name": s.record.name, "description": s.record.description})).collect::<Vec<_>>(),
            "count": skills.len(),
            "unreadable_notes": unreadable,
        })))
    }
}
