//! `tollgate-gateway`: an OpenAI- and Anthropic-compatible HTTP gateway over tollgate's
//! [`Models`](tollgate::Models), so programs in any language get tollgate's pacing.
//!
//! How a request flows: the virtual key is checked from the headers ([`Keys`], 401
//! before a byte of the body is read), the body read within its deadline and decoded
//! from the route's dialect into tollgate's neutral request, and the call made through
//! `Models` as one job (`key:<id>`, at the key's priority): it reserves on the key's and
//! the model's limiters and waits there holding nothing, then is sent, retried by type
//! and recorded. A request whose wait (every bucket, the queue and the retry sleeps
//! together) would pass its bound (`x-tollgate-max-wait-ms`, else the key's
//! `max_wait_ms`) is answered at once with 429 and the wait as `retry-after` (the
//! limiter's estimate, or the provider's own `retry-after`). The answer (or failure) is
//! encoded back in the client's dialect, whatever the model's provider; an upstream or
//! internal failure as a stable message naming the request id. Every model answer
//! carries OpenAI's `x-ratelimit-*` headers from the model's and the key's limiters, and
//! `GET /v1/tollgate/key` tells a key what it has left and has spent today.
//!
//! ```no_run
//! use std::path::Path;
//! use std::time::Duration;
//!
//! use tollgate::{Catalog, Models};
//! use tollgate_gateway::{Gateway, serve, shutdown_signal};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let catalog = Catalog::from_toml_file(Path::new("tollgate.toml"))?;
//! let gateway = Gateway::new(Models::builder().catalog(catalog).build()?);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:4000").await?;
//! // Until Ctrl-C or SIGTERM; then in-flight requests get 30 s to finish.
//! serve(listener, gateway, shutdown_signal(), Duration::from_secs(30)).await?;
//! # Ok(()) }
//! ```
//!
//! [`serve_with`] speaks HTTP/1.1 and HTTP/2 (h2c with prior knowledge on a plain
//! port; over TLS, h2 or HTTP/1.1 by ALPN with [`ServeOptions::with_tls`] and
//! [`TlsConfig::from_pem_files`]).
//!
//! [`router`] gives the routes alone, to mount in a larger axum app. A [`LiveGateway`]
//! (served by [`serve_live`]) swaps keys and catalog whole on a reload, each request
//! running on the ones it arrived under.
//! [`openai_completion`] and [`openai_embeddings`] write OpenAI's answer objects, for
//! other writers of that shape (the `tollgate run` batch output) to share.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod access;
mod answering;
mod anthropic;
mod auth;
mod client;
mod error;
mod extract;
mod failure;
mod ids;
mod key_view;
mod keys;
mod live;
mod metrics;
mod model_list;
mod openai;
mod ops;
mod params;
mod protocol;
mod quota;
mod reload;
mod responses;
mod room;
mod router;
mod serve;
mod spend_file;
mod spent_today;
mod sse;
mod state;
mod timing;
mod tls;

pub use access::ACCESS_TARGET;
pub use anthropic::TOKEN_COUNT_HEADER;
pub use auth::MAX_WAIT_HEADER;
pub use error::{Dialect, GatewayError, SHUTDOWN_RETRY_AFTER, retry_after_secs};
pub use keys::{Keys, KeysError, VirtualKey, hash_secret};
pub use live::{LiveGateway, ReloadSource};
pub use metrics::{GatewayMetrics, METRICS_CONTENT_TYPE};
pub use openai::{decode_openai_chat, openai_completion, openai_embeddings};
pub use ops::REQUEST_ID_HEADER;
pub use reload::{ReloadError, Reloaded};
pub use router::router;
pub use serve::{ServeOptions, bind, serve, serve_live, serve_with, shutdown_signal};
pub use spend_file::{FileSpendLedger, SpendFileError};
pub use state::{DEFAULT_BODY_LIMIT, Gateway};
pub use timing::BodyTiming;
pub use tls::{TlsConfig, TlsError};
