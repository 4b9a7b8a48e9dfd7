//! The gate on a shared remote (issue 49, docs/governance.md "The gate"): a git `pre-receive`
//! hook that runs `paravault gate check` on every push and refuses, naming the path and the
//! finding, what a replica's engine would never have pushed — a note the lint gate blocks, a
//! rewrite of the protected branch, a change to receipt lines already in the history, a
//! decision whose signature does not verify, an approver-key change not signed by an active
//! approver, a policy change without an approver's signature. It reads only what the push
//! changed (`git diff-tree` between the old and new tips): O(pushed change), not O(vault).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::approvals::keys::{ActiveKeys, PolicySignature, Registry};
use crate::error::{Error, Result};
use crate::note::path::VaultPath;
use crate::policy::LoadedPolicy;
use crate::store::git::Git;
use crate::store::layout;

const ZERO: &str = "0000000000000000000000000000000000000000";
/// git's empty tree: the base of a first push.
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
/// The bare repository's config key naming the protected branch.
const BRANCH_KEY: &str = "paravault.gate.branch";

/// What `gate install` did.
#[derive(Debug, Clone, Serialize)]
pub struct GateInstallReport {
    pub repository: String,
    pub hook: String,
    pub branch: String,
    /// The paravault binary the hook runs.
    pub binary: String,
}

/// One refusal: where, and why.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Refusal {
    pub reference: String,
    pub path: Option<String>,
    pub finding: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.path {
            Some(path) => write!(f, "{}: {path}: {}", self.reference, self.finding),
            None => write!(f, "{}: {}", self.reference, self.finding),
        }
    }
}

/// What `gate check` judged.
#[derive(Debug, Clone, Serialize, Default)]
pub struct GateCheckReport {
    /// Ref updates judged.
    pub updates: usize,
    /// Paths the pushes changed (what the check read).
    pub paths_checked: usize,
    pub refusals: Vec<Refusal>,
}

/// `paravault gate install <bare repository>`: writes the `pre-receive` hook that runs
/// `binary gate check`, and records the protected branch in the repository's config. An
/// existing hook that is not paravault's is never replaced.
pub fn install(repository: &Path, branch: &str, binary: &Path) -> Result<GateInstallReport> {
    Git::version()?;
    let repository = std::path::absolute(repository).map_err(|e| Error::io("resolving", "the repository", e))?;
    let git = Git::at(&repository);
    let bare = git.output(["rev-parse", "--is-bare-repository"], &[], None)?;
    if !bare.status.success() || bare.text() != "true" {
        return Err(Error::InvalidArgument {
            name: "repository",
            reason: format!("{} is not a bare git repository (`git init --bare` makes one)", repository.display()),
        });
    }
    if branch.is_empty() || branch.starts_with('-') || branch.contains(char::is_whitespace) {
        return Err(Error::InvalidArgument { name: "branch", reason: format!("'{branch}' is not a branch name") });
    }
    let binary = std::path::absolute(binary).map_err(|e| Error::io("resolving", "the paravault binary", e))?;
    let hook = repository.join("hooks").join("pre-receive");
    let script = hook_script(&binary);
    match std::fs::read_to_string(&hook) {
        Ok(existing) if !existing.contains(HOOK_MARKER) => {
            return Err(Error::InvalidArgument {
                name: "repository",
                reason: format!("{} already has a pre-receive hook that paravault did not write; merge it by hand", repository.display()),
            });
        }
        _ => {}
    }
    git.run("config", ["config", BRANCH_KEY, branch])?;
    crate::store::durable::install_executable(&repository, &hook, script.as_bytes())?;
    Ok(GateInstallReport {
        repository: repository.display().to_string(),
        hook: hook.display().to_string(),
        branch: branch.to_string(),
        binary: binary.display().to_string(),
    })
}

const HOOK_MARKER: &str = "# paravault gate";

fn hook_script(binary: &Path) -> String {
    let quoted = binary.display().to_string().replace('\'', "'\\''");
    format!(
        "#!/bin/sh\n{HOOK_MARKER}: installed by `paravault gate install` (docs/governance.md, \"The gate\").\n\
         # It refuses a push that a replica's engine would never make; git passes the updates on stdin.\n\
         exec '{quoted}' gate check --repository \"$PWD\"\n"
    )
}

/// `paravault gate check`: judges the ref updates git passes a `pre-receive` hook
/// (`<old> <new> <ref>` per line) against the repository at `repository`. Refusals are
/// returned in the report (the hook then exits non-zero and git changes nothing). `today` judges
/// the pushed notes' freshness, as a write on a replica would.
pub fn check(repository: &Path, updates: &str, today: chrono::NaiveDate) -> Result<GateCheckReport> {
    let git = Git::in_hook(repository);
    let branch = git.output(["config", "--get", BRANCH_KEY], &[], None)?;
    let branch = if branch.status.success() { branch.text() } else { crate::replicate::DEFAULT_BRANCH.to_string() };
    let protected = format!("refs/heads/{branch}");
    let mut report = GateCheckReport::default();
    for line in updates.lines().filter(|l| !l.trim().is_empty()) {
        let mut parts = line.split_whitespace();
        let (Some(old), Some(new), Some(reference)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(Error::InvalidArgument { name: "updates", reason: format!("'{line}' is not '<old> <new> <ref>'") });
        };
        report.updates += 1;
        let refuse =
            |path: Option<&str>, finding: String| Refusal { reference: reference.to_string(), path: path.map(str::to_string), finding };
        if reference != protected {
            report.refusals.push(refuse(None, format!("this vault's remote accepts only its branch '{branch}'")));
            continue;
        }
        if new == ZERO {
            report.refusals.push(refuse(None, "deleting the vault's branch".into()));
            continue;
        }
        let first = old == ZERO;
        if !first && !git.is_ancestor(old, new)? {
            report.refusals.push(refuse(None, "not a fast-forward: the push rewrites history the remote already holds".into()));
            continue;
        }
        let base = if first { EMPTY_TREE } else { old };
        let changed = git.changed_paths(base, new)?;
        report.paths_checked += changed.len();
        let mut judge = Judge { git: &git, base: (!first).then_some(old), new, today, active: None, policy: None };
        for (status, path) in &changed {
            if let Some(finding) = judge.path(*status, path, first)? {
                report.refusals.push(refuse(Some(path), finding));
            }
        }
    }
    Ok(report)
}

/// Judges the paths of one ref update.
struct Judge<'a> {
    git: &'a Git,
    /// The old tip (`None`: the first push).
    base: Option<&'a str>,
    new: &'a str,
    today: chrono::NaiveDate,
    /// The new tip's approver keys, verified (loaded on first use).
    active: Option<std::result::Result<Option<ActiveKeys>, String>>,
    policy: Option<std::result::Result<LoadedPolicy, String>>,
}

impl Judge<'_> {
    fn old_blob(&self, path: &str) -> Result<Option<Vec<u8>>> {
        match self.base {
            Some(base) => self.git.blob_at(base, path),
            None => Ok(None),
        }
    }

    /// The new tip's registry, verified as an append to the old tip's.
    fn active(&mut self) -> Result<std::result::Result<Option<ActiveKeys>, String>> {
        if self.active.is_none() {
            let new = self.git.blob_at(self.new, layout::APPROVER_KEYS)?;
            let old = self.old_blob(layout::APPROVER_KEYS)?;
            let verdict = match (old, new) {
                (_, None) => Ok(None),
                (None, Some(new)) => Registry::parse(&new).and_then(|r| r.verify()).map(Some).map_err(|e| e.to_string()),
                (Some(old), Some(new)) => Registry::parse(&old)
                    .and_then(|old| Registry::parse(&new).and_then(|new| old.check_append(&new)))
                    .map(Some)
                    .map_err(|e| e.to_string()),
            };
            self.active = Some(verdict);
        }
        Ok(self.active.clone().expect("set above"))
    }

    /// The policy notes are judged under: the new tip's override (its signature is judged
    /// on its own path).
    fn policy(&mut self) -> Result<std::result::Result<LoadedPolicy, String>> {
        if self.policy.is_none() {
            let text = self.git.blob_at(self.new, layout::POLICY_OVERRIDE)?.map(|b| String::from_utf8_lossy(&b).into_owned());
            self.policy = Some(LoadedPolicy::from_texts(text.as_deref()).map_err(|e| e.to_string()));
        }
        Ok(self.policy.clone().expect("set above"))
    }

    fn path(&mut self, status: char, path: &str, first: bool) -> Result<Option<String>> {
        let new_blob = || -> Result<Vec<u8>> { Ok(self.git.blob_at(self.new, path)?.unwrap_or_default()) };
        if path == layout::APPROVER_KEYS {
            return Ok(match self.active()? {
                Ok(Some(_)) => None,
                Ok(None) => Some("removes the approver-key registry".into()),
                Err(e) => Some(e),
            });
        }
        if path == layout::POLICY_OVERRIDE || path == layout::POLICY_SIGNATURE {
            if first && self.git.blob_at(self.new, layout::APPROVER_KEYS)?.is_none() {
                // The first push of a vault that has no approver keys yet sets the policy.
                return Ok(None);
            }
            let active =
                match self.active()? {
                    Ok(Some(active)) => active,
                    Ok(None) => return Ok(Some(
                        "a policy change must be signed by an approver, and the vault has no approver keys (`paravault approver register`)"
                            .into(),
                    )),
                    Err(e) => return Ok(Some(e)),
                };
            let policy = self.git.blob_at(self.new, layout::POLICY_OVERRIDE)?.unwrap_or_default();
            let Some(signature) = self.git.blob_at(self.new, layout::POLICY_SIGNATURE)? else {
                return Ok(Some(format!(
                    "the policy changed without an approver's signature ({}; `paravault policy sign`)",
                    layout::POLICY_SIGNATURE
                )));
            };
            return Ok(PolicySignature::verify(&signature, &policy, &active).err().map(|e| e.to_string()));
        }
        if let Some(rest) = path.strip_prefix(&format!("{}/", layout::APPROVAL_DECISIONS_DIR)) {
            if status != 'A' {
                return Ok(Some("changes or removes a decision record the remote already holds (decisions are immutable)".into()));
            }
            let active = match self.active()? {
                Ok(Some(active)) => active,
                Ok(None) => return Ok(Some("a decision record, and the vault has no approver keys to verify it with".into())),
                Err(e) => return Ok(Some(e)),
            };
            let id = rest.strip_suffix(".json").unwrap_or(rest);
            return Ok(crate::approvals::verify_decision_bytes(&new_blob()?, id, &active.ever_registered()).err().map(|e| e.to_string()));
        }
        if let Some(rest) = path.strip_prefix(&format!("{}/", layout::REPLICAS_DIR)) {
            if rest.ends_with(".jsonl") {
                return self.receipts(status, path);
            }
            return Ok(None);
        }
        if path.starts_with(".paravault/") || first {
            // Other travelling engine files (proposals, conflicts, the ignore rules) carry no
            // authority: a proposal is untrusted until a verified decision binds its hash. A
            // first push's notes predate the gate.
            return Ok(None);
        }
        if status == 'D' {
            return Ok(None);
        }
        let Ok(note) = VaultPath::parse(path) else { return Ok(None) };
        if !note.has_md_extension() {
            return Ok(None);
        }
        let policy = match self.policy()? {
            Ok(policy) => policy,
            Err(e) => return Ok(Some(format!("the policy does not load: {e}"))),
        };
        let findings = crate::lint::note_blocking_findings(&policy, &note, &new_blob()?, self.today);
        Ok((!findings.is_empty())
            .then(|| findings.iter().map(|f| format!("lint gate: [{}] {}", f.rule, f.message)).collect::<Vec<_>>().join("; ")))
    }

    /// A receipt mirror file: lines already in the history stay byte for byte, and the new
    /// lines continue the chain (`prev` hashes the line before, `seq` + 1).
    fn receipts(&self, status: char, path: &str) -> Result<Option<String>> {
        if status == 'D' {
            return Ok(Some("removes receipt lines the remote already holds".into()));
        }
        let old = self.old_blob(path)?.unwrap_or_default();
        let new = self.git.blob_at(self.new, path)?.unwrap_or_default();
        if !new.starts_with(&old) {
            return Ok(Some("changes receipt lines the remote already holds (receipts are append-only)".into()));
        }
        // The line before the appended ones: the old file's last, else the previous file's
        // last (a new file continues the file before it), else the chain's start.
        let mut before: Option<Vec<u8>> = last_line(&old).map(<[u8]>::to_vec);
        if before.is_none()
            && let Some(n) = mirror_number(path)
            && n > 1
        {
            let previous = path.replace(&format!("receipts-{n:06}.jsonl"), &format!("receipts-{:06}.jsonl", n - 1));
            before = self.git.blob_at(self.new, &previous)?.as_deref().and_then(last_line).map(<[u8]>::to_vec);
            if before.is_none() {
                return Ok(Some(format!("starts a receipt file whose predecessor {previous} is missing")));
            }
        }
        let appended = &new[old.len()..];
        Ok(crate::write::receipts::verify_continuation(before.as_deref(), appended).err())
    }
}

fn last_line(bytes: &[u8]) -> Option<&[u8]> {
    bytes.split(|&b| b == b'\n').rfind(|l| !l.is_empty())
}

fn mirror_number(path: &str) -> Option<u64> {
    path.rsplit('/').next()?.strip_prefix("receipts-")?.strip_suffix(".jsonl")?.parse().ok()
}

/// Where the running binary is (what `gate install` points the hook at by default).
pub fn current_binary() -> Result<PathBuf> {
    std::env::current_exe().map_err(|e| Error::io("finding", "the paravault binary", e))
}
