//! The gateway under test: a catalog on the scripted `fake` provider, served on a
//! 127.0.0.1 port the test binds itself, or driven in process (for the paused clock).

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, Response};
use tokio::sync::oneshot;
use tollgate::{Catalog, Models};
use tollgate_fake::FakeProvider;
use tollgate_gateway::{Gateway, Keys, ServeOptions, bind, hash_secret, router, serve, serve_with};
use tower::ServiceExt;

pub mod stalling;

/// `chat` answers at once; `slow` takes one request a minute (a second one waits ~60 s);
/// `embed` embeds in width 4.
pub const CATALOG: &str = r#"
[embeddings]
width = 4

[models.chat]
provider = "fake"
name = "fake-chat"
rpm = 6000
max_output_tokens = 256
default_output_tokens = 64
arrival_allowance_ms = 0

[models.slow]
provider = "fake"
name = "fake-slow"
rpm = 1
max_output_tokens = 64
arrival_allowance_ms = 0

[models.embed]
provider = "fake"
kind = "embeddings"
name = "fake-embed"
rpm = 3000
tpm = 1000000
native_width = 4
"#;

/// `priced`: $1,000 per million output tokens, so its 64-token worst case is $0.064.
pub const PRICED: &str = r#"
[models.priced]
provider = "fake"
name = "fake-priced"
rpm = 6000
max_output_tokens = 64
arrival_allowance_ms = 0

[models.priced.price]
input = 0.0
output = 1000.0
"#;

/// `Models` over [`PRICED`] with `fake` as its provider, recording to `recorder`.
pub fn priced_models(
    fake: &FakeProvider,
    recorder: Option<std::sync::Arc<dyn tollgate::pipeline::Recorder>>,
) -> Models {
    let mut builder = Models::builder()
        .catalog(Catalog::from_toml_str(PRICED).unwrap())
        .provider(fake.clone());
    if let Some(recorder) = recorder {
        builder = builder.recorder(recorder);
    }
    builder.build().unwrap()
}

/// A gateway over [`PRICED`] with key `nb` (secret `nb-secret`), its metrics the
/// `Models`' recorder (so `/metrics` and the access log have the calls' figures), the
/// fake answering 10 tokens in and 50 out.
pub fn priced_gateway(fake: &FakeProvider) -> Gateway {
    let usage = tollgate::Usage {
        input_tokens: 10,
        output_tokens: 50,
        ..tollgate::Usage::default()
    };
    fake.reply_any(tollgate_fake::FakeReply::text("ok").with_usage(usage));
    let metrics = std::sync::Arc::new(tollgate_gateway::GatewayMetrics::new());
    let models = priced_models(fake, Some(metrics.clone()));
    let keys = Keys::from_toml_str(&format!(
        "[[keys]]\nid = \"nb\"\nsecret_sha256 = \"{}\"\n",
        hash_secret("nb-secret")
    ))
    .unwrap();
    Gateway::new(models)
        .with_metrics(metrics)
        .with_keys(keys)
        .unwrap()
}

/// The secret of the test key `notebook`, allowed `chat` and `slow` only.
pub const SECRET: &str = "tg-test-secret-0123456789";

/// `Models` over [`CATALOG`] with `fake` as its `fake` provider.
pub fn models(fake: &FakeProvider) -> Models {
    Models::builder()
        .catalog(Catalog::from_toml_str(CATALOG).unwrap())
        .provider(fake.clone())
        .build()
        .unwrap()
}

/// One key, `notebook` ([`SECRET`]): models `chat` and `slow`, interactive.
pub fn keys() -> Keys {
    Keys::from_toml_str(&format!(
        "[[keys]]\nid = \"notebook\"\nsecret_sha256 = \"{}\"\nmodels = [\"chat\", \"slow\"]\npriority = \"interactive\"\n",
        hash_secret(SECRET)
    ))
    .unwrap()
}

/// A gateway serving on 127.0.0.1.
pub struct Running {
    pub url: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Serves `gateway` on a free 127.0.0.1 port.
pub async fn start(gateway: Gateway) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stopped.await;
    };
    let task = tokio::spawn(serve(listener, gateway, shutdown, Duration::from_secs(30)));
    Running {
        url,
        stop: Some(stop),
        task,
    }
}

impl Running {
    /// Signals shutdown and waits for the server to return.
    pub async fn stop(mut self) -> std::io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task).await.unwrap()
    }

    /// `url` + `path`.
    pub fn at(&self, path: &str) -> String {
        format!("{}{}", self.url, path)
    }
}

/// Serves `gateway` with `options` on a free 127.0.0.1 port (a backlog of 8,192) until
/// the test ends: the address.
pub async fn serve_until_the_end(gateway: Gateway, options: ServeOptions) -> std::net::SocketAddr {
    let listener = bind("127.0.0.1:0".parse().unwrap(), 8192).unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(serve_with(
        listener,
        gateway,
        std::future::pending(),
        options,
    ));
    address
}

/// A client without a proxy (the tests talk to 127.0.0.1 only).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// A JSON POST to `url` with `headers` over HTTP: the status, headers and body text.
pub async fn send_json(
    url: String,
    body: &serde_json::Value,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut request = client().post(url).json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

/// One request through `gateway`'s router in process (no socket: for the paused clock).
pub async fn call(gateway: &Gateway, request: Request<Body>) -> Response<Body> {
    router(gateway.clone()).oneshot(request).await.unwrap()
}

/// A JSON POST to `path` with `headers`.
pub fn post(path: &str, body: &serde_json::Value, headers: &[(&str, &str)]) -> Request<Body> {
    let mut builder = Request::post(path).header("content-type", "application/json");
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(Body::from(body.to_string())).unwrap()
}

/// The whole body of an in-process answer, as JSON.
pub async fn json_of(response: Response<Body>) -> serde_json::Value {
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// The `data:` payloads of an SSE body, with their `event:` names (if any).
pub fn sse_events(body: &str) -> Vec<(Option<String>, String)> {
    body.split("\n\n")
        .filter(|f| !f.trim().is_empty())
        .map(|frame| {
            let mut event = None;
            let mut data = String::new();
            for line in frame.lines() {
                if let Some(name) = line.strip_prefix("event: ") {
                    event = Some(name.to_owned());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            (event, data)
        })
        .collect()
}

/// The limiter snapshot of `gateway`'s model `model_id`.
pub async fn snapshot(gateway: &Gateway, model_id: &str) -> tollgate::limit::LimiterSnapshot {
    gateway
        .models()
        .limiter(model_id)
        .unwrap()
        .snapshot()
        .await
        .unwrap()
}
