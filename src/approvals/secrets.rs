//! Approver secrets: argon2id PHC strings in `<config_dir>/approvers.json`, outside every vault,
//! so that nothing a vault holds (and no MCP tool, which writes only notes) can add an approver.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::store::durable;

/// The approvers file's name inside the per-user configuration folder.
pub const APPROVERS_FILE: &str = "approvers.json";
/// The shortest secret accepted (a person types it; argon2 makes each guess expensive).
pub(crate) const SECRET_CHARS_MIN: usize = 12;
const SCHEMA: &str = "paravault.approvers.v1";

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproversFile {
    schema: String,
    /// Approver name → argon2id PHC string.
    approvers: BTreeMap<String, String>,
    /// Approver name → their ed25519 signing key, sealed under the same secret (issue 49).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    signing_keys: BTreeMap<String, super::keys::SealedKey>,
}

/// The per-user configuration folder that holds the approvers file (`user_config::config_dir`).
pub fn default_dir() -> Result<PathBuf> {
    crate::user_config::config_dir()
}

fn read_file(dir: &Path) -> Result<ApproversFile> {
    let path = dir.join(APPROVERS_FILE);
    match crate::store::nofollow::read(&path) {
        Ok(bytes) => {
            let file: ApproversFile = serde_json::from_slice(&bytes).map_err(|e| Error::NotConfigured {
                capability: "human approval",
                remediation: format!(
                    "the approvers file {APPROVERS_FILE} in the paravault configuration folder is unreadable ({e}); fix or remove it"
                ),
            })?;
            if file.schema != SCHEMA {
                return Err(Error::NotConfigured {
                    capability: "human approval",
                    remediation: format!("the approvers file has schema '{}', expected '{SCHEMA}'", file.schema),
                });
            }
            Ok(file)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(ApproversFile { schema: SCHEMA.into(), approvers: BTreeMap::new(), signing_keys: BTreeMap::new() })
        }
        Err(e) => Err(Error::io("reading", APPROVERS_FILE, e)),
    }
}

/// Checks an approver name: 1-64 characters of `a-z`, `0-9`, `.`, `_`, `-`.
pub(crate) fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'));
    if ok { Ok(()) } else { Err(Error::InvalidArgument { name: "approver", reason: "1-64 characters of a-z, 0-9, '.', '_', '-'".into() }) }
}

fn write_file(dir: &Path, file: &ApproversFile) -> Result<()> {
    durable::create_dir_all(dir, dir)?;
    let bytes = serde_json::to_vec_pretty(file).map_err(|e| Error::io("encoding", APPROVERS_FILE, std::io::Error::other(e)))?;
    durable::replace(dir, &dir.join(APPROVERS_FILE), &bytes)
}

/// Registers a new approver with `secret` (stored only as an argon2id hash) and a new ed25519
/// signing key sealed under it. An existing approver is never replaced: remove their line
/// from the file by hand to reset a secret.
pub fn add_approver(dir: &Path, name: &str, secret: &str) -> Result<()> {
    check_name(name)?;
    if secret.chars().count() < SECRET_CHARS_MIN {
        return Err(Error::InvalidArgument { name: "secret", reason: format!("must be at least {SECRET_CHARS_MIN} characters") });
    }
    let mut file = read_file(dir)?;
    if file.approvers.contains_key(name) {
        return Err(Error::InvalidArgument { name: "approver", reason: format!("'{name}' is already registered") });
    }
    let salt = SaltString::generate(&mut OsRng);
    let hash = Argon2::default()
        .hash_password(secret.as_bytes(), &salt)
        .map_err(|e| Error::io("hashing", "approver secret", std::io::Error::other(e.to_string())))?
        .to_string();
    file.approvers.insert(name.to_string(), hash);
    file.signing_keys.insert(name.to_string(), super::keys::generate_sealed(secret)?);
    write_file(dir, &file)
}

/// Gives an approver registered before signed approvals a signing key (their secret proves
/// it is them). An approver who has one keeps it: `already_has` is an invalid argument.
pub fn add_signing_key(dir: &Path, name: &str, secret: &str) -> Result<String> {
    verify(dir, name, secret)?;
    let mut file = read_file(dir)?;
    if file.signing_keys.contains_key(name) {
        return Err(Error::InvalidArgument { name: "approver", reason: format!("'{name}' already has a signing key") });
    }
    let sealed = super::keys::generate_sealed(secret)?;
    let public = sealed.public_key.clone();
    file.signing_keys.insert(name.to_string(), sealed);
    write_file(dir, &file)?;
    Ok(public)
}

/// The public half of an approver's signing key (hex), if they have one.
pub fn public_key(dir: &Path, name: &str) -> Result<Option<String>> {
    Ok(read_file(dir)?.signing_keys.get(name).map(|k| k.public_key.clone()))
}

/// The registered approvers' names.
pub fn approver_names(dir: &Path) -> Result<Vec<String>> {
    Ok(read_file(dir)?.approvers.into_keys().collect())
}

/// Verifies `secret` for `name`; an unknown name and a wrong secret are the same refusal, and
/// an unknown name costs the same argon2 work (no timing difference tells names apart).
pub fn verify(dir: &Path, name: &str, secret: &str) -> Result<()> {
    let file = read_file(dir)?;
    if file.approvers.is_empty() {
        return Err(Error::NotConfigured {
            capability: "human approval",
            remediation: "register an approver first: `paravault approver add NAME` (the secret is prompted)".into(),
        });
    }
    // A fixed hash of a random secret, checked when the name is unknown.
    const DECOY: &str = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$1vJ1C9nTr8mM0nxRl9EUZ1Uo0Fq3d6kV0jz4gq4mJ2Y";
    let known = file.approvers.get(name);
    let stored = known.map_or(DECOY, String::as_str);
    let parsed = PasswordHash::new(stored).map_err(|_| Error::NotConfigured {
        capability: "human approval",
        remediation: format!("the approvers file holds an invalid hash for '{name}'; remove that line and add the approver again"),
    })?;
    let matches = Argon2::default().verify_password(secret.as_bytes(), &parsed).is_ok();
    if matches && known.is_some() { Ok(()) } else { Err(Error::ApproverRefused) }
}

/// Proof that a registered approver presented their secret: only `authenticate` makes one, so
/// a holder (the web UI's login session) can decide without keeping the secret. It holds the
/// approver's signing key, unsealed with the secret (none for an approver registered before
/// signed approvals).
#[derive(Clone, PartialEq, Eq)]
pub struct AuthenticatedApprover {
    name: String,
    signing: Option<ed25519_dalek::SigningKey>,
}

impl std::fmt::Debug for AuthenticatedApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("AuthenticatedApprover").field("name", &self.name).field("signs", &self.signing.is_some()).finish()
    }
}

impl AuthenticatedApprover {
    /// The approver's registered name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The approver's signing key, when they have one.
    pub(crate) fn signing_key(&self) -> Option<&ed25519_dalek::SigningKey> {
        self.signing.as_ref()
    }
}

/// Checks the name and verifies `secret` (as `verify`), returning the proof of it with the
/// approver's signing key unsealed.
pub fn authenticate(dir: &Path, name: &str, secret: &str) -> Result<AuthenticatedApprover> {
    check_name(name)?;
    verify(dir, name, secret)?;
    let signing = match read_file(dir)?.signing_keys.get(name) {
        Some(sealed) => Some(super::keys::unseal(sealed, secret)?),
        None => None,
    };
    Ok(AuthenticatedApprover { name: name.to_string(), signing })
}
