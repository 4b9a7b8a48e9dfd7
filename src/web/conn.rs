//! The connection layer of `paravault web` (issue 45 item 6): the accept loop that puts the
//! Router on a socket. axum's `serve` sets no header deadline and no connection cap, so a
//! client drip-feeding headers held its connection forever, and enough of them used up the
//! process's descriptors (the vault's own file opens then failed: `GET /` answered 500). Here
//! hyper's HTTP/1 server reads each request's headers under a deadline (hyper's
//! `header_read_timeout` with tokio's timer; it also closes a connection idle before its first
//! or next request), and a connection is accepted only while fewer than the total cap (a tokio
//! semaphore) and fewer than the per-client cap (a count per address) are open; one beyond
//! either is answered 503 and closed at once, before a byte of it is read.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tower::ServiceExt;

use super::WebOptions;

/// What a connection over a cap is told before it is closed (no body, nothing read from it).
const REFUSED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\nretry-after: 1\r\ncontent-length: 0\r\n\r\n";

/// The open connections per client key.
#[derive(Default)]
struct Clients(Mutex<HashMap<IpAddr, usize>>);

/// Who a connection is counted against: an IPv4 address, or an IPv6 address's /64 (one host
/// usually holds a whole /64, so counting single addresses would not cap it); an IPv4 client
/// reaching an IPv6 socket is counted as its IPv4 address.
fn client_key(address: IpAddr) -> IpAddr {
    match address.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        v4 => v4,
    }
}

/// One accepted connection's place under both caps, given back when it is dropped (the
/// connection closed).
struct Slot {
    _permit: OwnedSemaphorePermit,
    clients: Arc<Clients>,
    key: IpAddr,
}

impl Slot {
    /// A place for a connection from `address`, or none when the total cap or the client's cap
    /// is reached.
    fn take(total: &Arc<Semaphore>, clients: &Arc<Clients>, address: IpAddr, per_client: usize) -> Option<Slot> {
        let permit = Arc::clone(total).try_acquire_owned().ok()?;
        let key = client_key(address);
        let mut counts = clients.0.lock().unwrap_or_else(PoisonError::into_inner);
        let count = counts.entry(key).or_insert(0);
        if *count >= per_client {
            return None;
        }
        *count += 1;
        Some(Slot { _permit: permit, clients: Arc::clone(clients), key })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.clients.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

/// Answers a connection over a cap with 503 if its send buffer takes it now (never waiting on
/// the client), then closes it.
fn refuse(stream: TcpStream) {
    let _ = stream.try_write(REFUSED);
}

/// Serves `app` on `listener` until `shutdown` completes, under `options`' header deadline
/// (`request_timeout`) and connection caps (`max_connections`, `max_connections_per_client`).
/// Handlers see the client's address as `ConnectInfo<SocketAddr>`, as with axum's `serve`. On
/// shutdown it stops accepting, lets each open connection finish its request, and waits at
/// most one request deadline for them.
pub async fn serve_connections<F>(listener: TcpListener, app: Router, options: &WebOptions, shutdown: F) -> io::Result<()>
where
    F: Future<Output = ()> + Send,
{
    let max = options.max_connections.clamp(1, Semaphore::MAX_PERMITS);
    let total = Arc::new(Semaphore::new(max));
    let clients = Arc::new(Clients::default());
    let per_client = options.max_connections_per_client.max(1);
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(options.request_timeout);
    let (closing, closing_seen) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    // Out of descriptors or a connection reset before it was taken: wait a
                    // little instead of spinning on the same error.
                    tracing::warn!(%error, "web: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(slot) = Slot::take(&total, &clients, remote.ip(), per_client) else {
            refuse(stream);
            continue;
        };
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(remote));
            app.clone().oneshot(request)
        });
        let connection = http.serve_connection(TokioIo::new(stream), service);
        let mut closing_seen = closing_seen.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = closing_seen.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    closing.send_replace(());
    let all = u32::try_from(max).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(options.request_timeout, total.acquire_many(all)).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_counted_by_ipv4_address_or_ipv6_slash_64() {
        let v6 = |s: &str| client_key(s.parse().unwrap());
        assert_eq!(v6("2001:db8:1:2:3:4:5:6"), v6("2001:db8:1:2:ffff::1"));
        assert_ne!(v6("2001:db8:1:2::1"), v6("2001:db8:1:3::1"));
        assert_eq!(v6("::ffff:10.0.0.7"), v6("10.0.0.7"));
        assert_ne!(v6("10.0.0.7"), v6("10.0.0.8"));
    }

    #[test]
    fn slots_are_refused_past_either_cap_and_given_back_when_dropped() {
        let total = Arc::new(Semaphore::new(3));
        let clients = Arc::new(Clients::default());
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = Slot::take(&total, &clients, a, 2).unwrap();
        let _second = Slot::take(&total, &clients, a, 2).unwrap();
        assert!(Slot::take(&total, &clients, a, 2).is_none(), "a's cap");
        let _third = Slot::take(&total, &clients, b, 2).unwrap();
        assert!(Slot::take(&total, &clients, b, 2).is_none(), "the total cap");
        assert_eq!(total.available_permits(), 0, "a refused slot keeps no permit");
        drop(first);
        assert!(Slot::take(&total, &clients, a, 2).is_some(), "a dropped slot is given back");
        assert_eq!(clients.0.lock().unwrap().get(&a), Some(&1), "the slot just taken was dropped again");
    }
}
