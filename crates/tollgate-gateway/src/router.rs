//! The routes, and serving them: a header read timeout, a connection limit, and a
//! graceful shutdown that answers what is still queued with 503.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use crate::state::Gateway;
use crate::{anthropic, openai, ops};

/// The gateway's routes over `state`: both dialects, `/health`, `/ready`, `/metrics`,
/// with the body cap and `x-request-id` on every answer. Mount it in a larger app, or
/// [`serve`] it.
pub fn router(state: Gateway) -> Router {
    let limit = state.body_limit;
    Router::new()
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route("/v1/embeddings", post(openai::embeddings))
        .route("/v1/models", get(openai::list_models))
        .route("/v1/messages", post(anthropic::messages))
        .route("/health", get(ops::health))
        .route("/ready", get(ops::ready))
        .route("/metrics", get(ops::metrics))
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn(ops::request_id))
        .with_state(state)
}

/// How [`serve_with`] treats connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServeOptions {
    /// How long requests in flight may take to finish once shutdown starts.
    pub grace: Duration,
    /// How long a client may take to send a request's headers (a slow client holding
    /// a connection open without asking anything is closed).
    pub header_read_timeout: Duration,
    /// The most connections served at once; past it the gateway accepts no more until
    /// one closes (the operating system's backlog holds the rest).
    pub max_connections: usize,
}

impl ServeOptions {
    /// The defaults of `tollgate serve`: 30 s grace, 10 s for headers, 4,096 connections.
    pub const DEFAULT: ServeOptions = ServeOptions {
        grace: Duration::from_secs(30),
        header_read_timeout: Duration::from_secs(10),
        max_connections: 4096,
    };

    /// The defaults with this `grace`.
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// The defaults with this header read timeout.
    pub fn with_header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// The defaults with this connection limit (at least 1).
    pub fn with_max_connections(mut self, max: usize) -> Self {
        self.max_connections = max.max(1);
        self
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Serves `state`'s router on `listener` until `shutdown` completes, with
/// [`ServeOptions::DEFAULT`] but for `grace`. See [`serve_with`].
pub async fn serve(
    listener: TcpListener,
    state: Gateway,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    serve_with(
        listener,
        state,
        shutdown,
        ServeOptions::DEFAULT.with_grace(grace),
    )
    .await
}

/// Serves `state`'s router on `listener` (HTTP/1.1, keep-alive) until `shutdown`
/// completes; then stops accepting, marks the gateway draining (`/ready` answers 503,
/// requests still queued on a limiter are answered 503 with `retry-after`), lets the
/// requests already sent finish for at most `options.grace`, and returns.
pub async fn serve_with(
    listener: TcpListener,
    state: Gateway,
    shutdown: impl Future<Output = ()> + Send + 'static,
    options: ServeOptions,
) -> std::io::Result<()> {
    let app = router(state.clone());
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout);
    let connections = Arc::new(Semaphore::new(options.max_connections.max(1)));
    // Each connection holds a receiver: when they are all gone, `open.closed()` ends.
    let (stop, stopping) = watch::channel(false);
    let (open, held) = watch::channel(());
    let mut shutdown = pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            permit = connections.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, a connection reset before accept: keep
                    // serving the others, and do not spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let builder = builder.clone();
        let mut stopping = stopping.clone();
        let held = held.clone();
        tokio::spawn(async move {
            let connection = builder
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            let mut connection = pin!(connection);
            let stop = async move {
                // The guard `wait_for` returns is dropped here, not held across awaits.
                let _ = stopping.wait_for(|s| *s).await.is_ok();
            };
            tokio::select! {
                _ = connection.as_mut() => {}
                () = stop => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
            drop((permit, held));
        });
    }
    drop(listener);
    state.start_draining();
    let _ = stop.send(true);
    drop(held);
    tokio::select! {
        () = open.closed() => Ok(()),
        () = tokio::time::sleep(options.grace) => {
            tracing::warn!(grace = ?options.grace, "in-flight requests did not finish within the shutdown grace; dropping them");
            Ok(())
        }
    }
}

/// Completes on Ctrl-C or (on Unix) SIGTERM: the shutdown future for [`serve`].
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}
