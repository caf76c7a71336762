//! The routes, and serving them with a graceful shutdown.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use tokio::net::TcpListener;

use crate::state::Gateway;
use crate::{anthropic, openai, ops};

/// The gateway's routes over `state`: both dialects, `/health`, `/ready`, with the body
/// cap and `x-request-id` on every answer. Mount it in a larger app, or [`serve`] it.
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

/// Serves `state`'s router on `listener` until `shutdown` completes; then stops
/// accepting, marks the gateway draining (`/ready` answers 503) and lets in-flight
/// requests finish for at most `grace` before returning.
pub async fn serve(
    listener: TcpListener,
    state: Gateway,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let app = router(state.clone());
    let (stopping_tx, stopping_rx) = tokio::sync::oneshot::channel::<()>();
    let signal = async move {
        shutdown.await;
        state.start_draining();
        let _ = stopping_tx.send(());
    };
    let server = axum::serve(listener, app).with_graceful_shutdown(signal);
    let server = std::pin::pin!(server.into_future());
    tokio::select! {
        result = server => result,
        () = async {
            // The deadline runs from the shutdown signal, not from the start.
            if stopping_rx.await.is_ok() {
                tokio::time::sleep(grace).await;
            } else {
                std::future::pending::<()>().await;
            }
        } => {
            tracing::warn!(?grace, "in-flight requests did not finish within the shutdown grace; dropping them");
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
