//! `infra_action`: a client for the local INFRA-1 broker (reference §9.2), identifiers only.
//!
//! The engine never runs ssh or rsync and never sees hosts, credentials or commands: it sends
//! one `power.infra-request.v1` JSON line over a Unix-domain socket and reads one
//! `power.infra-response.v1` line back, which carries either a `power.infra-receipt.v1` or a
//! `power.infra-block.v1` with a stable reason code.
//!
//! - The socket is `infra.broker_socket` from policy, else `PARAVAULT_INFRA_SOCKET`. None
//!   configured, or not reachable → a block `MISSING_EXECUTION_CAPABILITY`; never a fallback.
//! - The broker must run as `infra.broker_uid` (null: the uid this process runs as): its uid
//!   is read from the socket's peer credentials (`SO_PEERCRED`, taken by the kernel when the
//!   broker listened) before a byte is sent; any other process answering on the socket gets
//!   nothing and the result is a `PROTOCOL_ERROR` block.
//! - The request is validated before any connection (typed `invalid_argument`): identifiers
//!   match `^[A-Za-z0-9._:-]{1,128}$`; `replicate` needs `idempotency_key`; `verify` needs
//!   `run_id`; `approval_ref` only with `replicate`; `task_id` needs `idempotency_key` and
//!   `expected_revision` (and `expected_revision` needs `task_id`).
//! - `request_digest` = sha256 of the canonical JSON of the request fields (`schema`,
//!   `operation` and every parameter, absent ones as null); `nonce` is fresh per connection.
//! - The response must echo both, stay within `infra.response_bytes_max` (64 KiB by default),
//!   arrive within `infra.timeout_ms` (else a `TIMEOUT` block), and contain none of the
//!   forbidden keys (stdout, stderr, argv, command, environment, password, private_key, token)
//!   at any depth; any violation → a `PROTOCOL_ERROR` block. Broker blocks pass through.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::handoff::journal::{canonical_json, digest};
use crate::vault::Vault;

pub mod broker;

pub const REQUEST_SCHEMA: &str = "power.infra-request.v1";
pub const RESPONSE_SCHEMA: &str = "power.infra-response.v1";
pub const RECEIPT_SCHEMA: &str = "power.infra-receipt.v1";
pub const BLOCK_SCHEMA: &str = "power.infra-block.v1";
/// Schema of `infra_action`'s own result.
pub const RESULT_SCHEMA: &str = "paravault.infra-result.v1";
/// Environment fallback for the broker socket.
pub const SOCKET_ENV: &str = "PARAVAULT_INFRA_SOCKET";

/// Keys that must never appear in a broker response.
pub const FORBIDDEN_KEYS: &[&str] = &["stdout", "stderr", "argv", "command", "environment", "password", "private_key", "token"];

/// Every block reason code of INFRA-1.
pub const REASON_CODES: &[&str] = &[
    "MISSING_EXECUTION_CAPABILITY",
    "CAPABILITY_DISABLED",
    "HOST_IDENTITY_UNTRUSTED",
    "HOST_IDENTITY_MISMATCH",
    "NETWORK_UNAVAILABLE",
    "BROKER_CREDENTIAL_UNAVAILABLE",
    "APPROVAL_REQUIRED",
    "REQUEST_INPUT_MISSING",
    "PROFILE_NOT_FOUND",
    "TARGET_NOT_ALLOWED",
    "POLICY_INVALID",
    "RESOURCE_LIMIT",
    "IDEMPOTENCY_CONFLICT",
    "OPERATION_IN_FLIGHT",
    "UNKNOWN_COMPLETION",
    "RUN_NOT_FOUND",
    "RUN_ALREADY_REPLICATED",
    "APPROVAL_REPLAY",
    "TIMEOUT",
    "PROTOCOL_ERROR",
    "PRINCIPAL_DENIED",
    "PRINCIPAL_UNAVAILABLE",
    "DRY_RUN_REQUIRED",
    "PROCESS_UNAVAILABLE",
    "OPERATION_FAILED",
];

/// What `infra_action` returns (`paravault.infra-result.v1`): the broker's receipt, or why the
/// action was blocked.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InfraResult {
    /// `paravault.infra-result.v1`.
    pub schema: String,
    /// The operation asked for.
    pub operation: InfraOperation,
    /// The digest of the request's fields, as the broker saw them.
    pub request_digest: String,
    /// `ok` (the broker answered with a receipt) or `blocked`.
    pub status: InfraStatus,
    /// The broker's receipt (`ok` only), as the broker sent it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Value>,
    /// Why the action was blocked (`blocked` only): `reason_code` and the detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block: Option<Value>,
    /// The person's approval a replicate ran under (a human rule for infra_replicate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<Value>,
}

/// Whether the broker ran the action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum InfraStatus {
    /// The broker answered with a receipt.
    Ok,
    /// The action did not run (see `block`).
    Blocked,
}

/// What the broker is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum InfraOperation {
    Status,
    Probe,
    RsyncDryRun,
    Replicate,
    Verify,
}

/// One `infra_action` call: identifiers only, unknown fields refused.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InfraRequest {
    pub operation: InfraOperation,
    #[serde(default)]
    pub target: Option<String>,
    #[serde(default)]
    pub profile: Option<String>,
    #[serde(default)]
    pub dry_run: Option<bool>,
    /// Required for `replicate`.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// Required for `verify` (`run_<sha256>` issued by the broker).
    #[serde(default)]
    pub run_id: Option<String>,
    /// Only with `replicate`.
    #[serde(default)]
    pub approval_ref: Option<String>,
    #[serde(default)]
    pub task_id: Option<String>,
    #[serde(default)]
    pub expected_revision: Option<u64>,
}

impl InfraRequest {
    pub fn new(operation: InfraOperation) -> Self {
        InfraRequest {
            operation,
            target: None,
            profile: None,
            dry_run: None,
            idempotency_key: None,
            run_id: None,
            approval_ref: None,
            task_id: None,
            expected_revision: None,
        }
    }
}

/// `^[A-Za-z0-9._:-]{1,128}$`
pub fn valid_identifier(value: &str) -> bool {
    !value.is_empty() && value.len() <= 128 && value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

fn invalid(name: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidArgument { name, reason: reason.into() }
}

/// Checks the request before any connection.
pub fn validate(request: &InfraRequest) -> Result<()> {
    for (name, value) in [
        ("target", &request.target),
        ("profile", &request.profile),
        ("idempotency_key", &request.idempotency_key),
        ("run_id", &request.run_id),
        ("approval_ref", &request.approval_ref),
        ("task_id", &request.task_id),
    ] {
        if let Some(v) = value
            && !valid_identifier(v)
        {
            return Err(invalid(name, "must match ^[A-Za-z0-9._:-]{1,128}$"));
        }
    }
    let op = request.operation;
    if op == InfraOperation::Replicate && request.idempotency_key.is_none() {
        return Err(invalid("idempotency_key", "replicate requires an idempotency_key"));
    }
    if op == InfraOperation::Verify && request.run_id.is_none() {
        return Err(invalid("run_id", "verify requires a run_id"));
    }
    if op != InfraOperation::Replicate && request.approval_ref.is_some() {
        return Err(invalid("approval_ref", "approval_ref is accepted only with replicate"));
    }
    if request.task_id.is_some() && (request.idempotency_key.is_none() || request.expected_revision.is_none()) {
        return Err(invalid("task_id", "task correlation requires idempotency_key and expected_revision"));
    }
    if request.expected_revision.is_some() && request.task_id.is_none() {
        return Err(invalid("expected_revision", "expected_revision is accepted only with task_id"));
    }
    Ok(())
}

/// The request fields as sent (without digest and nonce), absent ones as null.
pub fn request_fields(request: &InfraRequest) -> Value {
    json!({
        "schema": REQUEST_SCHEMA,
        "operation": request.operation,
        "target": request.target,
        "profile": request.profile,
        "dry_run": request.dry_run,
        "idempotency_key": request.idempotency_key,
        "run_id": request.run_id,
        "approval_ref": request.approval_ref,
        "task_id": request.task_id,
        "expected_revision": request.expected_revision,
    })
}

/// What a person approves for a `replicate`: the request fields with `approval_ref` null (the
/// reference names the approval; it is not part of what runs). The client's gate under a
/// `human` rule and the broker's `approval: explicit` bind the same fields, so one decision
/// covers both.
pub fn approval_subject(request: &InfraRequest) -> Value {
    let mut fields = request_fields(request);
    fields["approval_ref"] = Value::Null;
    fields
}

fn nonce() -> String {
    crate::hex::random(16)
}

/// Whether any object at any depth has a forbidden key (compared case-insensitively).
pub fn has_forbidden_key(value: &Value) -> Option<String> {
    match value {
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            if FORBIDDEN_KEYS.contains(&k.to_ascii_lowercase().as_str()) { Some(k.clone()) } else { has_forbidden_key(v) }
        }),
        Value::Array(items) => items.iter().find_map(has_forbidden_key),
        _ => None,
    }
}

fn client_block(reason: &str, detail: &str) -> Value {
    json!({ "schema": BLOCK_SCHEMA, "reason_code": reason, "detail": detail, "source": "client" })
}

/// Why a response was refused, or the validated response.
enum Outcome {
    Receipt(Value),
    Block(Value),
}

/// Validates one response line against the request digest and nonce.
fn check_response(line: &[u8], request_digest: &str, nonce: &str) -> Outcome {
    let protocol = |detail: &str| Outcome::Block(client_block("PROTOCOL_ERROR", detail));
    let Ok(value) = serde_json::from_slice::<Value>(line) else { return protocol("the response is not valid JSON") };
    if !value.is_object() {
        return protocol("the response is not a JSON object");
    }
    if let Some(key) = has_forbidden_key(&value) {
        return protocol(&format!("the response carries the forbidden key '{key}'"));
    }
    if value.get("schema").and_then(Value::as_str) != Some(RESPONSE_SCHEMA) {
        return protocol("the response schema is not power.infra-response.v1");
    }
    if value.get("request_digest").and_then(Value::as_str) != Some(request_digest) {
        return protocol("the response request_digest does not match the request");
    }
    if value.get("nonce").and_then(Value::as_str) != Some(nonce) {
        return protocol("the response nonce does not match this connection");
    }
    match (value.get("receipt"), value.get("block")) {
        (Some(receipt), None) => {
            if receipt.get("schema").and_then(Value::as_str) != Some(RECEIPT_SCHEMA) {
                return protocol("the receipt schema is not power.infra-receipt.v1");
            }
            Outcome::Receipt(receipt.clone())
        }
        (None, Some(block)) => {
            if block.get("schema").and_then(Value::as_str) != Some(BLOCK_SCHEMA) {
                return protocol("the block schema is not power.infra-block.v1");
            }
            match block.get("reason_code").and_then(Value::as_str) {
                Some(code) if REASON_CODES.contains(&code) => Outcome::Block(block.clone()),
                _ => protocol("the block has no known reason_code"),
            }
        }
        _ => protocol("the response must carry exactly one of receipt and block"),
    }
}

impl Vault {
    /// The broker socket: policy `infra.broker_socket`, else `PARAVAULT_INFRA_SOCKET`.
    pub fn infra_socket(&self) -> Option<std::path::PathBuf> {
        self.policy()
            .policy
            .infra
            .broker_socket
            .clone()
            .or_else(|| std::env::var(SOCKET_ENV).ok().filter(|s| !s.is_empty()))
            .map(std::path::PathBuf::from)
    }

    /// `infra_action`: validates the request, calls the broker, validates its answer.
    /// Returns `{schema, operation, status: ok|blocked, request_digest, receipt | block}`.
    ///
    /// A `replicate` that is not a dry run is a governed operation (`infra_replicate`,
    /// docs/governance.md): under a `human` rule a person approves exactly these request fields
    /// before the broker is called, and the result's `approval` names them.
    pub fn infra_action(&self, request: InfraRequest) -> Result<InfraResult> {
        validate(&request)?;
        let fields = request_fields(&request);
        let approval = if request.operation == InfraOperation::Replicate && request.dry_run != Some(true) {
            crate::approvals::gate_action(self, crate::approvals::Operation::InfraReplicate, &[], &approval_subject(&request))?
        } else {
            None
        };
        let request_digest = digest(&fields);
        let outcome = match self.infra_socket() {
            None => Outcome::Block(client_block("MISSING_EXECUTION_CAPABILITY", "no INFRA-1 broker socket is configured")),
            Some(socket) => self.call_broker(&socket, fields, &request_digest),
        };
        let (status, receipt, block) = match outcome {
            Outcome::Receipt(receipt) => (InfraStatus::Ok, Some(receipt), None),
            Outcome::Block(block) => (InfraStatus::Blocked, None, Some(block)),
        };
        Ok(InfraResult {
            schema: RESULT_SCHEMA.to_string(),
            operation: request.operation,
            request_digest,
            status,
            receipt,
            block,
            approval,
        })
    }

    fn call_broker(&self, socket: &std::path::Path, fields: Value, request_digest: &str) -> Outcome {
        let infra = &self.policy().policy.infra;
        let timeout = Duration::from_millis(infra.timeout_ms);
        let mut stream = match UnixStream::connect(socket) {
            Ok(s) => s,
            Err(_) => return Outcome::Block(client_block("MISSING_EXECUTION_CAPABILITY", "the INFRA-1 broker is not reachable")),
        };
        if stream.set_read_timeout(Some(timeout)).is_err() || stream.set_write_timeout(Some(timeout)).is_err() {
            return Outcome::Block(client_block("PROTOCOL_ERROR", "the broker connection cannot be configured"));
        }
        // Reference §9.2: the client checks the broker's uid, before the request leaves.
        let expected = infra.broker_uid.unwrap_or_else(|| rustix::process::geteuid().as_raw());
        match rustix::net::sockopt::socket_peercred(&stream) {
            Ok(peer) if peer.uid.as_raw() == expected => {}
            Ok(peer) => {
                let detail = format!(
                    "the process on the broker socket runs as uid {}, not uid {expected} (infra.broker_uid); nothing was sent",
                    peer.uid.as_raw()
                );
                return Outcome::Block(client_block("PROTOCOL_ERROR", &detail));
            }
            Err(_) => return Outcome::Block(client_block("PROTOCOL_ERROR", "the broker's uid cannot be read from the socket")),
        }
        let nonce = nonce();
        let mut wire = fields;
        wire["request_digest"] = json!(request_digest);
        wire["nonce"] = json!(nonce);
        let mut line = canonical_json(&wire).into_bytes();
        line.push(b'\n');
        if stream.write_all(&line).and_then(|()| stream.flush()).is_err() {
            return Outcome::Block(client_block("MISSING_EXECUTION_CAPABILITY", "the INFRA-1 broker closed the connection"));
        }
        let limit = infra.response_bytes_max;
        let mut reader = BufReader::new((&stream).take(limit as u64 + 1));
        let mut response = Vec::new();
        match reader.read_until(b'\n', &mut response) {
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Outcome::Block(client_block(
                    "TIMEOUT",
                    "the broker did not answer within infra.timeout_ms; the outcome is unknown",
                ));
            }
            Err(_) => return Outcome::Block(client_block("PROTOCOL_ERROR", "the broker response could not be read")),
        }
        if response.len() > limit {
            return Outcome::Block(client_block("PROTOCOL_ERROR", "the broker response exceeds infra.response_bytes_max"));
        }
        if response.last() != Some(&b'\n') {
            return Outcome::Block(client_block("PROTOCOL_ERROR", "the broker response is not one complete JSON line"));
        }
        response.pop();
        check_response(&response, request_digest, &nonce)
    }
}
