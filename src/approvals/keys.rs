//! Signed approvals (docs/governance.md, "A shared vault"): each approver's ed25519 key, the
//! vault's registry of approvers' public keys, and the signatures a decision, a key change and
//! a policy change carry, so that every replica and the remote's gate verify an approval
//! instead of trusting a file.
//!
//! - The **private half** lives in the per-user approvers file (`secrets`), sealed under the
//!   approver secret (argon2id → ChaCha20-Poly1305): unsealing it needs the secret, exactly as
//!   deciding does today. No MCP tool reaches it.
//! - The **registry** (`.paravault/approver-keys.json`) travels with the vault. It is an
//!   append-only chain of entries (`add` / `revoke`), each naming the sha256 of the entry before
//!   it and signed by a key that was active before it; the first entry (the root, set when a
//!   vault is first shared) is signed by the key it adds. A replica pins the root it first saw
//!   (`.paravault/approver-keys.pin`, never committed) and refuses a registry with another root.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use chacha20poly1305::aead::{Aead, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Nonce};
use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::store::{durable, layout, nofollow};
use crate::write::sha256_hex;

/// The registry's schema.
pub const REGISTRY_SCHEMA: &str = "paravault.approver-keys.v1";
/// The policy signature's schema.
pub const POLICY_SIGNATURE_SCHEMA: &str = "paravault.policy-signature.v1";

/// An approver's private key sealed under their secret, kept in the per-user approvers file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SealedKey {
    /// The public half, hex.
    pub public_key: String,
    /// argon2id salt (hex, 16 bytes) for the sealing key.
    pub salt: String,
    /// ChaCha20-Poly1305 nonce (hex, 12 bytes).
    pub nonce: String,
    /// The sealed 32-byte seed (hex).
    pub sealed: String,
}

fn random<const N: usize>() -> Result<[u8; N]> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| Error::io("drawing", "random bytes", std::io::Error::other(e.to_string())))?;
    Ok(bytes)
}

fn sealing_cipher(secret: &str, salt: &[u8]) -> Result<ChaCha20Poly1305> {
    let mut key = [0u8; 32];
    argon2::Argon2::default()
        .hash_password_into(secret.as_bytes(), salt, &mut key)
        .map_err(|e| Error::io("deriving", "the sealing key", std::io::Error::other(e.to_string())))?;
    Ok(ChaCha20Poly1305::new(&key.into()))
}

fn unhex<const N: usize>(text: &str, what: &str) -> Result<[u8; N]> {
    let bytes = crate::hex::decode(text).ok_or_else(|| Error::SignatureInvalid { what: what.to_string(), reason: "not hex".into() })?;
    bytes.try_into().map_err(|_| Error::SignatureInvalid { what: what.to_string(), reason: format!("not {N} bytes") })
}

/// Makes a new key pair sealed under `secret`.
pub(crate) fn generate_sealed(secret: &str) -> Result<SealedKey> {
    let seed = random::<32>()?;
    let salt = random::<16>()?;
    let nonce = random::<12>()?;
    let signing = SigningKey::from_bytes(&seed);
    let sealed = sealing_cipher(secret, &salt)?
        .encrypt(Nonce::from_slice(&nonce), seed.as_slice())
        .map_err(|_| Error::io("sealing", "the signing key", std::io::Error::other("encryption failed")))?;
    Ok(SealedKey {
        public_key: crate::hex::encode(signing.verifying_key().as_bytes()),
        salt: crate::hex::encode(&salt),
        nonce: crate::hex::encode(&nonce),
        sealed: crate::hex::encode(&sealed),
    })
}

/// Unseals a key with the approver's secret (already verified against its argon2 hash).
pub(crate) fn unseal(sealed: &SealedKey, secret: &str) -> Result<SigningKey> {
    let salt = crate::hex::decode(&sealed.salt).ok_or(Error::ApproverRefused)?;
    let nonce: [u8; 12] = unhex(&sealed.nonce, "the sealed key's nonce")?;
    let bytes = crate::hex::decode(&sealed.sealed).ok_or(Error::ApproverRefused)?;
    let seed = sealing_cipher(secret, &salt)?.decrypt(Nonce::from_slice(&nonce), bytes.as_slice()).map_err(|_| Error::ApproverRefused)?;
    let seed: [u8; 32] = seed.try_into().map_err(|_| Error::ApproverRefused)?;
    let key = SigningKey::from_bytes(&seed);
    if crate::hex::encode(key.verifying_key().as_bytes()) != sealed.public_key {
        return Err(Error::ApproverRefused);
    }
    Ok(key)
}

/// A signature over some bytes: the key that made it and the signature, both hex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureBlock {
    pub public_key: String,
    pub signature: String,
}

/// Signs `message` with `key`.
pub(crate) fn sign(key: &SigningKey, message: &[u8]) -> SignatureBlock {
    SignatureBlock {
        public_key: crate::hex::encode(key.verifying_key().as_bytes()),
        signature: crate::hex::encode(&key.sign(message).to_bytes()),
    }
}

/// Checks that `block` is a valid signature of `message` by its key (strict: no malleable
/// signatures, no weak keys).
pub fn verify_signature(block: &SignatureBlock, message: &[u8], what: &str) -> Result<()> {
    let invalid = |reason: &str| Error::SignatureInvalid { what: what.to_string(), reason: reason.to_string() };
    let key: [u8; 32] = unhex(&block.public_key, what)?;
    let key = VerifyingKey::from_bytes(&key).map_err(|_| invalid("the public key is not a valid ed25519 key"))?;
    let signature: [u8; 64] = unhex(&block.signature, what)?;
    key.verify_strict(message, &ed25519_dalek::Signature::from_bytes(&signature)).map_err(|_| invalid("the signature does not verify"))
}

/// What an entry of the registry does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyAction {
    Add,
    Revoke,
}

/// One entry of the registry. The signature covers the entry's JSON without `signature`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyEntry {
    pub seq: u64,
    pub action: KeyAction,
    pub approver: String,
    pub public_key: String,
    pub at: String,
    /// The approver whose key signed this entry.
    pub signed_by: String,
    /// sha256 of the previous entry's JSON (with its signature); empty for the root.
    pub prev: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<SignatureBlock>,
}

impl KeyEntry {
    fn signed_bytes(&self) -> Result<Vec<u8>> {
        let unsigned = KeyEntry { signature: None, ..self.clone() };
        serde_json::to_vec(&unsigned).map_err(|e| Error::io("encoding", "a key entry", std::io::Error::other(e)))
    }

    fn hash(&self) -> Result<String> {
        Ok(sha256_hex(&serde_json::to_vec(self).map_err(|e| Error::io("encoding", "a key entry", std::io::Error::other(e)))?))
    }
}

/// The vault's registry of approvers' public keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    pub schema: String,
    pub entries: Vec<KeyEntry>,
}

/// The keys a verified registry holds active: approver → public keys (hex).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActiveKeys {
    pub keys: BTreeMap<String, BTreeSet<String>>,
    /// sha256 of the root entry (what a replica pins).
    pub root: String,
    /// Every key the chain ever added, revoked ones included: approver → public keys.
    pub ever: BTreeMap<String, BTreeSet<String>>,
}

impl ActiveKeys {
    /// Whether `public_key` is an active key of `approver`.
    pub fn holds(&self, approver: &str, public_key: &str) -> bool {
        self.keys.get(approver).is_some_and(|k| k.contains(public_key))
    }

    /// The keys ever registered, as if all were active: what the remote's gate checks a pushed
    /// decision against. A decision signed by a key revoked since was not forged; replicas no
    /// longer honour it (they check `keys`), and refusing it at the gate would hold back every
    /// later push of the replica that committed it while the key was active.
    pub fn ever_registered(&self) -> ActiveKeys {
        ActiveKeys { keys: self.ever.clone(), root: self.root.clone(), ever: self.ever.clone() }
    }

    fn count(&self) -> usize {
        self.keys.values().map(BTreeSet::len).sum()
    }
}

impl Registry {
    /// Parses the registry's bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let registry: Registry = serde_json::from_slice(bytes)
            .map_err(|e| Error::SignatureInvalid { what: layout::APPROVER_KEYS.to_string(), reason: format!("unreadable: {e}") })?;
        if registry.schema != REGISTRY_SCHEMA {
            return Err(Error::SignatureInvalid {
                what: layout::APPROVER_KEYS.to_string(),
                reason: format!("schema '{}', expected '{REGISTRY_SCHEMA}'", registry.schema),
            });
        }
        Ok(registry)
    }

    /// Verifies the whole chain and returns the keys active at its end.
    pub fn verify(&self) -> Result<ActiveKeys> {
        self.verify_prefix(self.entries.len())
    }

    /// Verifies the first `n` entries.
    fn verify_prefix(&self, n: usize) -> Result<ActiveKeys> {
        let mut active = ActiveKeys::default();
        let mut prev = String::new();
        for (i, entry) in self.entries.iter().take(n).enumerate() {
            let what = format!("{} entry {i} ({} {})", layout::APPROVER_KEYS, word(entry.action), entry.approver);
            let invalid = |reason: String| Error::SignatureInvalid { what: what.clone(), reason };
            if entry.seq != i as u64 {
                return Err(invalid(format!("its seq is {}, expected {i}", entry.seq)));
            }
            if entry.prev != prev {
                return Err(invalid("it does not name the entry before it (the chain was edited)".into()));
            }
            crate::approvals::secrets::check_name(&entry.approver)?;
            let Some(signature) = &entry.signature else { return Err(invalid("it is not signed".into())) };
            if i == 0 {
                if entry.action != KeyAction::Add || entry.signed_by != entry.approver || signature.public_key != entry.public_key {
                    return Err(invalid("the root entry must add a key signed by that same key".into()));
                }
            } else if !active.holds(&entry.signed_by, &signature.public_key) {
                return Err(invalid(format!("it is signed by a key that is not an active key of '{}'", entry.signed_by)));
            }
            verify_signature(signature, &entry.signed_bytes()?, &what)?;
            match entry.action {
                KeyAction::Add => {
                    let _: [u8; 32] = unhex(&entry.public_key, &what)?;
                    active.keys.entry(entry.approver.clone()).or_default().insert(entry.public_key.clone());
                    active.ever.entry(entry.approver.clone()).or_default().insert(entry.public_key.clone());
                }
                KeyAction::Revoke => {
                    let removed = active.keys.get_mut(&entry.approver).is_some_and(|k| k.remove(&entry.public_key));
                    if !removed {
                        return Err(invalid("it revokes a key that is not active".into()));
                    }
                    active.keys.retain(|_, k| !k.is_empty());
                    if active.count() == 0 {
                        return Err(invalid("it revokes the last active key (the vault would have no approver)".into()));
                    }
                }
            }
            if i == 0 {
                active.root = entry.hash()?;
            }
            prev = entry.hash()?;
        }
        Ok(active)
    }

    /// Checks that `new` only appends verified entries to `self` (the gate's rule for a pushed
    /// registry, and a replica's for an integrated one).
    pub fn check_append(&self, new: &Registry) -> Result<ActiveKeys> {
        let what = layout::APPROVER_KEYS.to_string();
        if new.entries.len() < self.entries.len() || new.entries[..self.entries.len()] != self.entries[..] {
            return Err(Error::SignatureInvalid {
                what,
                reason: "entries already in the history were changed or removed (the registry is append-only)".into(),
            });
        }
        new.verify()
    }

    /// Appends an entry signed by `signer` (who must hold an active key, or be the key added by
    /// the root entry).
    pub fn append(
        &mut self,
        action: KeyAction,
        approver: &str,
        public_key: &str,
        signer_name: &str,
        signer: &SigningKey,
        at: String,
    ) -> Result<()> {
        let prev = match self.entries.last() {
            Some(last) => last.hash()?,
            None => String::new(),
        };
        let mut entry = KeyEntry {
            seq: self.entries.len() as u64,
            action,
            approver: approver.to_string(),
            public_key: public_key.to_string(),
            at,
            signed_by: signer_name.to_string(),
            prev,
            signature: None,
        };
        entry.signature = Some(sign(signer, &entry.signed_bytes()?));
        self.entries.push(entry);
        // Refuse anything that would not verify (a revocation of the last key, a signer without
        // an active key) before it is written.
        self.verify().map(|_| ()).inspect_err(|_| {
            self.entries.pop();
        })
    }
}

fn word(action: KeyAction) -> &'static str {
    match action {
        KeyAction::Add => "add",
        KeyAction::Revoke => "revoke",
    }
}

/// Reads the vault's registry (`None` when the vault has none).
pub fn read_registry(root: &Path) -> Result<Option<Registry>> {
    match durable::read_engine_file(root, &layout::join(root, layout::APPROVER_KEYS)) {
        Ok(bytes) => Registry::parse(&bytes).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(nofollow::io_error("reading", layout::APPROVER_KEYS, e)),
    }
}

/// The registry `bytes` verified, remembered by their hash: a listing of N proposals reads the
/// registry N times and verifies its signatures once (the same bytes verify the same way).
fn verified(bytes: &[u8]) -> Result<ActiveKeys> {
    static LAST: std::sync::Mutex<Option<(blake3::Hash, ActiveKeys)>> = std::sync::Mutex::new(None);
    let digest = blake3::hash(bytes);
    if let Some((seen, active)) = LAST.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref()
        && *seen == digest
    {
        return Ok(active.clone());
    }
    let active = Registry::parse(bytes)?.verify()?;
    *LAST.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((digest, active.clone()));
    Ok(active)
}

/// The keys the vault's registry holds active, verified and checked against this replica's pin
/// of the root (pinned on first sight). `None` when the vault has no registry.
pub fn active_keys(root: &Path) -> Result<Option<ActiveKeys>> {
    let bytes = match durable::read_engine_file(root, &layout::join(root, layout::APPROVER_KEYS)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(nofollow::io_error("reading", layout::APPROVER_KEYS, e)),
    };
    let active = verified(&bytes)?;
    let pin_path = layout::join(root, layout::APPROVER_KEYS_PIN);
    match durable::read_engine_file(root, &pin_path) {
        Ok(pinned) => {
            if String::from_utf8_lossy(&pinned).trim() != active.root {
                return Err(Error::SignatureInvalid {
                    what: layout::APPROVER_KEYS.to_string(),
                    reason: format!(
                        "its root entry is not the one this replica pinned ({}); the registry was replaced",
                        layout::APPROVER_KEYS_PIN
                    ),
                });
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Pinned on first sight. A read-only vault cannot keep the pin; it still verifies
            // the chain, and pins when it can.
            if let Err(error) = durable::replace(root, &pin_path, format!("{}\n", active.root).as_bytes()) {
                tracing::debug!(%error, "could not pin the approver-key registry's root");
            }
        }
        Err(e) => return Err(nofollow::io_error("reading", layout::APPROVER_KEYS_PIN, e)),
    }
    Ok(Some(active))
}

/// Writes the registry (after `append`).
pub(crate) fn write_registry(root: &Path, registry: &Registry) -> Result<()> {
    let mut bytes =
        serde_json::to_vec_pretty(registry).map_err(|e| Error::io("encoding", layout::APPROVER_KEYS, std::io::Error::other(e)))?;
    bytes.push(b'\n');
    durable::create_dir_all(root, &layout::join(root, layout::STATE_DIR))?;
    durable::replace(root, &layout::join(root, layout::APPROVER_KEYS), &bytes)
}

/// A policy override's signature (`.paravault/policy.sig`): who approved exactly this text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySignature {
    pub schema: String,
    /// sha256 of `.paravault/policy.yaml`'s bytes.
    pub policy_sha256: String,
    pub approver: String,
    pub signed_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<SignatureBlock>,
}

impl PolicySignature {
    fn signed_bytes(&self) -> Result<Vec<u8>> {
        let unsigned = PolicySignature { signature: None, ..self.clone() };
        serde_json::to_vec(&unsigned).map_err(|e| Error::io("encoding", layout::POLICY_SIGNATURE, std::io::Error::other(e)))
    }

    /// Signs the policy text `policy` for `approver`.
    pub(crate) fn new(policy: &[u8], approver: &str, key: &SigningKey, at: String) -> Result<Self> {
        let mut sig = PolicySignature {
            schema: POLICY_SIGNATURE_SCHEMA.into(),
            policy_sha256: sha256_hex(policy),
            approver: approver.to_string(),
            signed_at: at,
            signature: None,
        };
        sig.signature = Some(sign(key, &sig.signed_bytes()?));
        Ok(sig)
    }

    /// Verifies that this signs exactly `policy` with an active key of its approver.
    pub fn verify(bytes: &[u8], policy: &[u8], active: &ActiveKeys) -> Result<PolicySignature> {
        let what = layout::POLICY_SIGNATURE.to_string();
        let invalid = |reason: String| Error::SignatureInvalid { what: what.clone(), reason };
        let sig: PolicySignature = serde_json::from_slice(bytes).map_err(|e| invalid(format!("unreadable: {e}")))?;
        if sig.schema != POLICY_SIGNATURE_SCHEMA {
            return Err(invalid(format!("schema '{}'", sig.schema)));
        }
        if sig.policy_sha256 != sha256_hex(policy) {
            return Err(invalid("it signs another text than the policy (the policy changed after it was signed)".into()));
        }
        let Some(block) = &sig.signature else { return Err(invalid("it is not signed".into())) };
        if !active.holds(&sig.approver, &block.public_key) {
            return Err(invalid(format!("it is not signed by an active key of '{}'", sig.approver)));
        }
        verify_signature(block, &sig.signed_bytes()?, &what)?;
        Ok(sig)
    }
}

/// What a key change did (`paravault approver register` / `revoke`).
#[derive(Debug, Clone, Serialize)]
pub struct KeyChange {
    pub approver: String,
    pub public_key: String,
    pub action: KeyAction,
    pub signed_by: String,
    /// The entry's position in the registry (0: the root, set when the vault is first shared).
    pub seq: u64,
    /// Approver → number of active keys, after the change.
    pub active: BTreeMap<String, usize>,
}

impl crate::vault::Vault {
    /// Adds (`KeyAction::Add`) or revokes an approver's public key in the vault's registry,
    /// signed by `signer`, who proves it with their secret (their key is unsealed with it).
    /// The first key of a vault is its own approver's, signed by itself; every later change is
    /// signed by a key already active. `public_key` defaults to the approver's own key in this
    /// machine's approvers file. Nothing is written unless the new registry verifies.
    pub fn change_approver_key(
        &self,
        config_dir: &Path,
        action: KeyAction,
        approver: &str,
        public_key: Option<&str>,
        signer: &str,
        signer_secret: &str,
    ) -> Result<KeyChange> {
        crate::approvals::secrets::check_name(approver)?;
        let authenticated = crate::approvals::secrets::authenticate(config_dir, signer, signer_secret)?;
        let Some(key) = authenticated.signing_key() else {
            return Err(Error::SignatureInvalid {
                what: format!("approver '{signer}'"),
                reason: "has no signing key yet: `paravault approver key NAME` makes one".into(),
            });
        };
        let public_key = match public_key {
            Some(k) => {
                let _: [u8; 32] = unhex(k, "--public-key")?;
                k.to_string()
            }
            None => crate::approvals::secrets::public_key(config_dir, approver)?.ok_or_else(|| Error::InvalidArgument {
                name: "public-key",
                reason: format!(
                    "'{approver}' has no signing key on this machine; pass the key they show with `paravault approver key {approver}`"
                ),
            })?,
        };
        let root = self.root();
        nofollow::refuse_symlinked_state(root)?;
        let _writer = self.lock_writer()?;
        let mut registry = read_registry(root)?.unwrap_or(Registry { schema: REGISTRY_SCHEMA.into(), entries: Vec::new() });
        if !registry.entries.is_empty() {
            // The registry on disk must verify (and match this replica's pin) before it grows.
            active_keys(root)?;
        }
        let at = self.clock().stamp(chrono::SecondsFormat::Secs);
        registry.append(action, approver, &public_key, signer, key, at)?;
        let active = registry.verify()?;
        write_registry(root, &registry)?;
        // The root is pinned at once: this replica set it.
        active_keys(root)?;
        let subject = format!("approver key: {} {approver}, signed by {signer}", word(action));
        crate::write::replica::commit_records_locked(self, &[layout::APPROVER_KEYS.to_string()], &subject);
        Ok(KeyChange {
            approver: approver.to_string(),
            public_key,
            action,
            signed_by: signer.to_string(),
            seq: registry.entries.len() as u64 - 1,
            active: active.keys.iter().map(|(name, keys)| (name.clone(), keys.len())).collect(),
        })
    }

    /// The approver keys the vault's registry holds active (verified; `None`: no registry).
    pub fn approver_keys(&self) -> Result<Option<ActiveKeys>> {
        active_keys(self.root())
    }

    /// Signs the policy override as it is now (`paravault policy sign`): `.paravault/policy.sig`
    /// names the approver and the sha256 of exactly this text. A shared vault's gate refuses a
    /// policy change without it; a replica does not take one from another.
    pub fn sign_policy(&self, config_dir: &Path, approver: &str, secret: &str) -> Result<PolicySignature> {
        let authenticated = crate::approvals::secrets::authenticate(config_dir, approver, secret)?;
        let Some(key) = authenticated.signing_key() else {
            return Err(Error::SignatureInvalid {
                what: format!("approver '{approver}'"),
                reason: "has no signing key yet: `paravault approver key NAME` makes one".into(),
            });
        };
        let root = self.root();
        nofollow::refuse_symlinked_state(root)?;
        let active = active_keys(root)?.ok_or_else(|| Error::SignatureInvalid {
            what: layout::POLICY_SIGNATURE.to_string(),
            reason: format!("this vault has no approver-key registry yet: `paravault approver register {approver}` sets the first key"),
        })?;
        if !active.holds(approver, &crate::hex::encode(key.verifying_key().as_bytes())) {
            return Err(Error::SignatureInvalid {
                what: format!("approver '{approver}'"),
                reason: format!("their key is not active in {}", layout::APPROVER_KEYS),
            });
        }
        let _writer = self.lock_writer()?;
        let policy = match durable::read_engine_file(root, &layout::join(root, layout::POLICY_OVERRIDE)) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(nofollow::io_error("reading", layout::POLICY_OVERRIDE, e)),
        };
        let at = self.clock().stamp(chrono::SecondsFormat::Secs);
        let signature = PolicySignature::new(&policy, approver, key, at)?;
        let mut bytes =
            serde_json::to_vec_pretty(&signature).map_err(|e| Error::io("encoding", layout::POLICY_SIGNATURE, std::io::Error::other(e)))?;
        bytes.push(b'\n');
        durable::replace(root, &layout::join(root, layout::POLICY_SIGNATURE), &bytes)?;
        let paths = [layout::POLICY_OVERRIDE.to_string(), layout::POLICY_SIGNATURE.to_string()];
        crate::write::replica::commit_records_locked(self, &paths, &format!("policy signed by {approver}"));
        Ok(signature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> SigningKey {
        SigningKey::from_bytes(&[byte; 32])
    }

    fn hex_pub(k: &SigningKey) -> String {
        crate::hex::encode(k.verifying_key().as_bytes())
    }

    #[test]
    fn a_sealed_key_opens_only_with_its_secret() {
        let sealed = generate_sealed("correct horse battery").unwrap();
        let key = unseal(&sealed, "correct horse battery").unwrap();
        assert_eq!(hex_pub(&key), sealed.public_key);
        assert!(matches!(unseal(&sealed, "wrong horse battery!"), Err(Error::ApproverRefused)));
    }

    #[test]
    fn the_registry_is_a_signed_append_only_chain() {
        let (alice, bob, mallory) = (key(1), key(2), key(3));
        let mut reg = Registry { schema: REGISTRY_SCHEMA.into(), entries: vec![] };
        // The root must sign itself.
        assert!(reg.append(KeyAction::Add, "alice", &hex_pub(&alice), "bob", &bob, "t0".into()).is_err());
        reg.append(KeyAction::Add, "alice", &hex_pub(&alice), "alice", &alice, "t0".into()).unwrap();
        let before = reg.clone();
        reg.append(KeyAction::Add, "bob", &hex_pub(&bob), "alice", &alice, "t1".into()).unwrap();
        let active = before.check_append(&reg).unwrap();
        assert!(active.holds("bob", &hex_pub(&bob)));
        // A key nobody registered cannot add itself.
        let mut forged = reg.clone();
        assert!(forged.append(KeyAction::Add, "mallory", &hex_pub(&mallory), "mallory", &mallory, "t2".into()).is_err());
        // A signature made by an unregistered key under a registered name does not verify.
        let mut tampered = reg.clone();
        tampered.entries[1].public_key = hex_pub(&mallory);
        assert!(tampered.verify().is_err());
        // Rewriting history is not an append.
        let mut rewritten = Registry { schema: REGISTRY_SCHEMA.into(), entries: vec![] };
        rewritten.append(KeyAction::Add, "mallory", &hex_pub(&mallory), "mallory", &mallory, "t0".into()).unwrap();
        assert!(before.check_append(&rewritten).is_err());
        // The last key cannot be revoked; another can.
        reg.append(KeyAction::Revoke, "alice", &hex_pub(&alice), "bob", &bob, "t3".into()).unwrap();
        assert!(reg.append(KeyAction::Revoke, "bob", &hex_pub(&bob), "bob", &bob, "t4".into()).is_err());
        assert!(!reg.verify().unwrap().holds("alice", &hex_pub(&alice)));
    }

    #[test]
    fn a_policy_signature_binds_the_exact_text() {
        let alice = key(1);
        let mut reg = Registry { schema: REGISTRY_SCHEMA.into(), entries: vec![] };
        reg.append(KeyAction::Add, "alice", &hex_pub(&alice), "alice", &alice, "t0".into()).unwrap();
        let active = reg.verify().unwrap();
        let sig = serde_json::to_vec(&PolicySignature::new(b"rules: 1\n", "alice", &alice, "t".into()).unwrap()).unwrap();
        PolicySignature::verify(&sig, b"rules: 1\n", &active).unwrap();
        assert!(PolicySignature::verify(&sig, b"rules: 2\n", &active).is_err());
        let mallory = key(3);
        let forged = serde_json::to_vec(&PolicySignature::new(b"rules: 2\n", "alice", &mallory, "t".into()).unwrap()).unwrap();
        assert!(PolicySignature::verify(&forged, b"rules: 2\n", &active).is_err());
    }
}
