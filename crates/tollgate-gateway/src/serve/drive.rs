//! One accepted connection served to its end: the TLS handshake (when the listener has
//! TLS), then HTTP/1.1 or HTTP/2 (h2 by ALPN; on a plain port, h2c when the client sends
//! the HTTP/2 preface), closed gracefully (HTTP/2: GOAWAY) when asked to make room or to
//! shut down, or once it has had no request in flight for the idle timeout.
//!
//! The idle timeout is what bounds a client that completes TCP and then sends nothing:
//! no TLS handshake, no HTTP/2 preface, no request line. hyper's HTTP/1.1 header read
//! timeout starts only once the protocol is known, and HTTP/2 has none.

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;
use tollgate::clock;
use tower::ServiceExt;

use super::{Connection, track};
use crate::protocol::JsonErrors;
use crate::tls::{Io, TlsConfig};

/// How a connection is served: the router, the protocols, TLS or not.
pub(super) struct Driven {
    pub(super) app: Router,
    pub(super) builder: auto::Builder<TokioExecutor>,
    pub(super) tls: Option<TlsConfig>,
    /// How long it may go with no request in flight (from its accept, its handshake
    /// included, or from its last answer).
    pub(super) idle_timeout: Duration,
}

/// The least time between two looks at a busy connection's idleness, so that a zero
/// timeout does not spin.
const IDLE_RECHECK: Duration = Duration::from_secs(1);

impl Driven {
    /// Serves `stream` as `connection` until it closes (the caller then frees its slot).
    pub(super) async fn serve(self, stream: TcpStream, connection: &Arc<Connection>) {
        let Driven {
            app,
            builder,
            tls,
            idle_timeout,
        } = self;
        let mut idle = pin!(idle_for(connection, idle_timeout));
        let io = match tls {
            None => Io::Plain(stream),
            Some(tls) => tokio::select! {
                accepted = tls.accept(stream) => match accepted {
                    Ok(io) => io,
                    Err(e) => {
                        tracing::debug!(target: "tollgate_gateway", error = %e, "TLS handshake failed");
                        return;
                    }
                },
                () = connection.closing() => return,
                () = &mut idle => return,
            },
        };
        let service = hyper::service::service_fn({
            let connection = connection.clone();
            move |request: Request<hyper::body::Incoming>| {
                let busy = connection.begin();
                let app = app.clone();
                async move {
                    let response = app.oneshot(request.map(Body::new)).await?;
                    Ok::<_, std::convert::Infallible>(track(response, busy))
                }
            }
        });
        let io = JsonErrors::new(TokioIo::new(io));
        let mut served = pin!(builder.serve_connection_with_upgrades(io, service));
        tokio::select! {
            _ = served.as_mut() => return,
            () = connection.closing() => {}
            () = &mut idle => {}
        }
        // HTTP/1.1: close once the answer in flight (if any) is out; HTTP/2: GOAWAY, the
        // streams in flight finish.
        served.as_mut().graceful_shutdown();
        // A client that neither opens a stream nor lets the connection close (an HTTP/2
        // one that never acknowledges the GOAWAY's ping) is dropped once it is idle.
        let grace = idle_timeout.max(IDLE_RECHECK);
        loop {
            tokio::select! {
                _ = served.as_mut() => return,
                () = tokio::time::sleep(grace) => {
                    if connection.active.load(Ordering::SeqCst) == 0 {
                        return;
                    }
                }
            }
        }
    }
}

/// Completes once `connection` has had no request in flight for `timeout`.
async fn idle_for(connection: &Connection, timeout: Duration) {
    loop {
        let now = clock::now();
        let deadline = {
            let since = connection
                .idle_since
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if connection.active.load(Ordering::SeqCst) == 0 {
                *since + timeout
            } else {
                now + timeout.max(IDLE_RECHECK)
            }
        };
        if deadline <= now {
            return;
        }
        tokio::time::sleep_until(deadline).await;
    }
}
