//! `paravault broker`: the INFRA-1 broker of one vault, with git as its transport
//! (docs/replication.md, "An agent asks for replication").
//!
//! It listens on one Unix-domain socket, takes one `power.infra-request.v1` line per
//! connection and answers one `power.infra-response.v1` line that echoes the request's digest
//! and nonce. The caller's principal is `uid:<n>` from the socket's peer credentials
//! (`SO_PEERCRED`, read by tokio): never anything the request says. A target is an identifier
//! from the person's configuration (`config`) naming a git remote of the vault: the remote's
//! URL, keys and command lines stay with git and never reach an answer.
//!
//! The broker runs in the foreground until SIGTERM, SIGINT or SIGHUP: it stops accepting,
//! removes its socket, lets the connections in progress finish (a replicate ends its run), and
//! returns. It refuses to start where a live broker answers on the socket or holds its lock,
//! and replaces a socket a stopped one left.

pub mod config;
mod ops;
mod records;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use self::config::BrokerConfig;
use self::ops::{Answer, Broker, block};
use crate::error::{Error, Result};
use crate::handoff::journal::{canonical_json, digest};
use crate::infra::{InfraRequest, REQUEST_SCHEMA, RESPONSE_SCHEMA, validate};
use crate::store::{durable, layout, nofollow};
use crate::vault::Vault;

/// The longest request line the broker reads.
const REQUEST_BYTES_MAX: u64 = 16 * 1024;
/// How long the broker waits for a connection's request line.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest socket path (`sun_path` holds 108 bytes with its NUL).
const SOCKET_PATH_MAX: usize = 107;

/// Where the broker listens and what configures it.
#[derive(Debug, Clone, Default)]
pub struct BrokerOptions {
    /// The socket (default `.paravault/broker.sock` in the vault).
    pub socket: Option<PathBuf>,
    /// The configuration (default `.paravault/broker.yaml` in the vault).
    pub config: Option<PathBuf>,
}

/// What the broker says once it listens (one JSON line on stdout).
#[derive(Debug, Clone, Serialize)]
pub struct BrokerReady {
    /// `paravault.broker-ready.v1`.
    pub schema: &'static str,
    /// The socket clients connect to (policy `infra.broker_socket` or `PARAVAULT_INFRA_SOCKET`).
    pub socket: String,
    /// The target identifiers of the configuration.
    pub targets: Vec<String>,
    pub pid: u32,
}

fn absolute(path: PathBuf) -> Result<PathBuf> {
    if path.is_absolute() {
        return Ok(path);
    }
    let here = std::env::current_dir().map_err(|e| Error::io("reading", "the current folder", e))?;
    Ok(here.join(path))
}

impl Vault {
    /// Serves the INFRA-1 broker of this vault until a stop signal (module docs); `ready` is
    /// called once it listens.
    pub fn serve_broker(&self, options: &BrokerOptions, ready: impl FnOnce(&BrokerReady)) -> Result<()> {
        let root = self.root().to_path_buf();
        let config_path = absolute(options.config.clone().unwrap_or_else(|| layout::join(&root, layout::BROKER_CONFIG)))?;
        let config = BrokerConfig::load(&config_path).map_err(|reason| Error::PolicyInvalid {
            file: config_path.display().to_string(),
            line: 0,
            reason,
        })?;
        let socket = absolute(options.socket.clone().unwrap_or_else(|| layout::join(&root, layout::BROKER_SOCKET)))?;
        if socket.as_os_str().len() > SOCKET_PATH_MAX {
            return Err(Error::InvalidArgument {
                name: "socket",
                reason: format!("{} is longer than a Unix socket path may be ({SOCKET_PATH_MAX} bytes)", socket.display()),
            });
        }
        let (Some(parent), Some(name)) = (socket.parent(), socket.file_name()) else {
            return Err(Error::InvalidArgument { name: "socket", reason: "name a file for the socket".into() });
        };
        if socket.starts_with(&root) {
            nofollow::refuse_symlinked_state(&root)?;
        }
        let live = || Error::InvalidArgument { name: "socket", reason: format!("a broker already answers on {}", socket.display()) };
        if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            return Err(live());
        }
        let lock = parent.join(format!("{}.lock", name.to_string_lossy()));
        let Some((lock_file, listener)) = durable::bind_engine_socket(parent, &socket, &lock)? else { return Err(live()) };
        let broker = Arc::new(Broker::new(self.reopened()?, config_path));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting", "the broker's runtime", e))?;
        ready(&BrokerReady {
            schema: "paravault.broker-ready.v1",
            socket: socket.display().to_string(),
            targets: config.targets.keys().cloned().collect(),
            pid: std::process::id(),
        });
        let served = runtime.block_on(serve(listener, broker, parent, &socket));
        durable::remove_engine_socket(parent, &socket);
        drop(lock_file);
        served
    }
}

/// Waits for SIGTERM, SIGINT or SIGHUP and returns its number (waits forever where they
/// cannot be watched). The broker and the MCP server stop on it.
pub async fn stop_signal() -> i32 {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) =
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()), signal(SignalKind::hangup()))
    else {
        tracing::warn!("cannot watch stop signals");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => 15,
        _ = int.recv() => 2,
        _ = hup.recv() => 1,
    }
}

async fn serve(listener: std::os::unix::net::UnixListener, broker: Arc<Broker>, parent: &Path, socket: &Path) -> Result<()> {
    let io = |e| Error::io("listening on", "the broker socket", e);
    listener.set_nonblocking(true).map_err(io)?;
    let listener = tokio::net::UnixListener::from_std(listener).map_err(io)?;
    let mut connections = tokio::task::JoinSet::new();
    let stop = stop_signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            signal = &mut stop => {
                tracing::info!(signal, "the broker stops");
                break;
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let broker = broker.clone();
                    connections.spawn(connection(stream, broker));
                }
                Err(error) => tracing::warn!(%error, "a broker connection could not be accepted"),
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    durable::remove_engine_socket(parent, socket);
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// One connection: the peer's uid, then one request and its answer (off the runtime's thread).
async fn connection(stream: tokio::net::UnixStream, broker: Arc<Broker>) {
    let uid = stream.peer_cred().ok().map(|credentials| credentials.uid());
    let Ok(stream) = stream.into_std() else { return };
    let _ = tokio::task::spawn_blocking(move || serve_one(&broker, &stream, uid)).await;
}

fn serve_one(broker: &Broker, stream: &std::os::unix::net::UnixStream, uid: Option<u32>) {
    if stream.set_nonblocking(false).is_err() || stream.set_read_timeout(Some(READ_TIMEOUT)).is_err() {
        return;
    }
    let mut line = Vec::new();
    let read = BufReader::new(stream.take(REQUEST_BYTES_MAX)).read_until(b'\n', &mut line);
    let answer = if read.is_err() || line.last() != Some(&b'\n') {
        respond(None, Err(block("PROTOCOL_ERROR", "the request is not one complete JSON line")))
    } else {
        line.pop();
        let parsed: Option<Value> = serde_json::from_slice(&line).ok();
        let answer = answer(broker, parsed.clone(), uid);
        respond(parsed.as_ref(), answer)
    };
    let mut out = answer.into_bytes();
    out.push(b'\n');
    let mut writer = stream;
    let _ = writer.write_all(&out).and_then(|()| writer.flush());
}

/// The response line: the request's digest and nonce echoed, then the receipt or the block.
fn respond(request: Option<&Value>, answer: Answer) -> String {
    let echo = |key: &str| request.and_then(|r| r.get(key)).and_then(Value::as_str).map(str::to_string);
    let mut response = json!({"schema": RESPONSE_SCHEMA, "request_digest": echo("request_digest"), "nonce": echo("nonce")});
    match answer {
        Ok(receipt) => response["receipt"] = receipt,
        Err(block) => response["block"] = block,
    }
    canonical_json(&response)
}

/// Checks the request's form and digest, then hands it to the broker.
fn answer(broker: &Broker, parsed: Option<Value>, uid: Option<u32>) -> Answer {
    let Some(Value::Object(mut fields)) = parsed else { return Err(block("PROTOCOL_ERROR", "the request is not one JSON object")) };
    let given = fields.remove("request_digest");
    let nonce = fields.remove("nonce");
    if !nonce.as_ref().and_then(Value::as_str).is_some_and(|n| !n.is_empty() && n.len() <= 128) {
        return Err(block("PROTOCOL_ERROR", "the request carries no nonce"));
    }
    if fields.get("schema").and_then(Value::as_str) != Some(REQUEST_SCHEMA) {
        return Err(block("PROTOCOL_ERROR", "the request schema is not power.infra-request.v1"));
    }
    if given.as_ref().and_then(Value::as_str) != Some(digest(&Value::Object(fields.clone())).as_str()) {
        return Err(block("PROTOCOL_ERROR", "the request_digest does not match the request's fields"));
    }
    fields.remove("schema");
    let request: InfraRequest = serde_json::from_value(Value::Object(fields))
        .map_err(|_| block("PROTOCOL_ERROR", "the request has unknown or malformed fields (identifiers only)"))?;
    if let Err(error) = validate(&request) {
        return Err(block("REQUEST_INPUT_MISSING", &error.to_string()));
    }
    let uid = uid.ok_or_else(|| block("PRINCIPAL_UNAVAILABLE", "the caller's credentials cannot be read from the socket"))?;
    broker.handle(&request, uid)
}
