//! `notifications/progress` for a tool call whose client gave a `progressToken`: the blocking
//! thread that runs the call reports (stage, done, total) through a thread-local sender, and an
//! async task forwards each report to the client. A call without a token reports nowhere.

use std::cell::RefCell;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};

/// One progress report: stage, done, total.
type Report = (&'static str, usize, usize);

thread_local! {
    static SENDER: RefCell<Option<tokio::sync::mpsc::UnboundedSender<Report>>> = const { RefCell::new(None) };
}

/// Where a call's progress goes: the sender its blocking thread installs, and the task that
/// forwards to the client (it ends when the sender is dropped).
pub(crate) struct Channel {
    sender: tokio::sync::mpsc::UnboundedSender<Report>,
    /// The forwarding task: it ends once the sender is dropped and every report went out.
    forwarder: tokio::task::JoinHandle<()>,
}

/// The sending half of a `Channel`, for the blocking thread that runs the call.
pub(crate) struct Reporter {
    sender: tokio::sync::mpsc::UnboundedSender<Report>,
}

impl Channel {
    /// Starts forwarding reports to `peer` under `token` (`notifications/progress`, progress
    /// increasing across stages: each stage's count, with the stage named in the message).
    pub(crate) fn start(peer: Peer<RoleServer>, token: ProgressToken) -> Channel {
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<Report>();
        let forwarder = tokio::spawn(async move {
            let mut last = -1.0_f64;
            while let Some((stage, done, total)) = receiver.recv().await {
                // The spec wants progress to increase: each stage restarts its count, so the
                // reports of a later stage continue from where the last one stood.
                let progress = if (done as f64) > last { done as f64 } else { last + 1.0 };
                last = progress;
                let param = ProgressNotificationParam::new(token.clone(), progress)
                    .with_total(total.max(done) as f64)
                    .with_message(format!("{stage} {done}/{total}"));
                if let Err(error) = peer.notify_progress(param).await {
                    tracing::debug!(error = %error, "progress notification not sent");
                    break;
                }
            }
        });
        Channel { sender, forwarder }
    }

    /// The reporter for the call's thread, and the forwarding task to await before the
    /// result is sent (so every report reaches the client before the result does).
    pub(crate) fn split(self) -> (Reporter, tokio::task::JoinHandle<()>) {
        (Reporter { sender: self.sender }, self.forwarder)
    }
}

impl Reporter {
    /// Runs `f` on this (blocking) thread with its progress reports going to the client.
    pub(crate) fn run<T>(self, f: impl FnOnce() -> T) -> T {
        SENDER.with(|s| *s.borrow_mut() = Some(self.sender));
        let out = f();
        SENDER.with(|s| *s.borrow_mut() = None);
        out
    }
}

/// Reports progress of the call running on this thread, if its client asked for it.
pub(crate) fn report(stage: &'static str, done: usize, total: usize) {
    SENDER.with(|s| {
        if let Some(sender) = s.borrow().as_ref() {
            let _ = sender.send((stage, done, total));
        }
    });
}
