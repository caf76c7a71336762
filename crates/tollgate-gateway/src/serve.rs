//! Serving the routes: a backlog sized for the connection limit, HTTP/1.1 and HTTP/2
//! (over TLS by ALPN, or h2c with prior knowledge), a header read timeout (which also
//! bounds a TLS handshake and how long a connection may sit idle), a connection limit
//! that makes room by closing the longest-idle connection rather than leaving a new
//! client in the backlog, parse errors answered with a JSON body, and a shutdown that
//! answers everyone.

mod drive;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;
use tollgate::clock;

use crate::live::LiveGateway;
use crate::state::Gateway;
use crate::tls::TlsConfig;

/// How [`serve_with`] treats connections.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeOptions {
    /// How long requests in flight may take to finish once shutdown starts; past it they
    /// are answered 503 (a stream ends with an error event) and their connections close.
    pub grace: Duration,
    /// How long a client may take to send a request's headers, counted from when the
    /// connection is ready for them: for a new connection (its TLS handshake included)
    /// and for an idle keep-alive one alike, so it is also the idle timeout (an HTTP/2
    /// connection with no request in flight that long is sent GOAWAY).
    pub header_read_timeout: Duration,
    /// The most connections served at once. At the limit, the connection idle longest
    /// (none of its requests in flight) is closed to make room; only when every one is
    /// busy does a new client wait in the backlog.
    pub max_connections: usize,
    /// After SIGTERM, once nothing is in flight, how long idle keep-alive connections
    /// stay open so that a request a client sends on one is answered 503 with
    /// `retry-after` (and `connection: close`) instead of meeting a closed socket.
    pub drain_linger: Duration,
    /// TLS on the listener (ALPN `h2`, `http/1.1`); `None`: plain TCP, HTTP/1.1 or h2c
    /// with prior knowledge.
    pub tls: Option<TlsConfig>,
}

impl ServeOptions {
    /// The defaults of `tollgate serve`: 30 s grace, 10 s for headers (and idle), 4,096
    /// connections, 2 s of linger.
    pub const DEFAULT: ServeOptions = ServeOptions {
        grace: Duration::from_secs(30),
        header_read_timeout: Duration::from_secs(10),
        max_connections: 4096,
        drain_linger: Duration::from_secs(2),
        tls: None,
    };

    /// The defaults with this `grace`.
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// The defaults with this header read (and idle) timeout.
    pub fn with_header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// The defaults with this connection limit (at least 1).
    pub fn with_max_connections(mut self, max: usize) -> Self {
        self.max_connections = max.max(1);
        self
    }

    /// The defaults with this drain linger.
    pub fn with_drain_linger(mut self, linger: Duration) -> Self {
        self.drain_linger = linger;
        self
    }

    /// The defaults with TLS on the listener.
    pub fn with_tls(mut self, tls: TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A listener on `address` whose accept backlog holds `backlog` connections (the
/// kernel caps it at `net.core.somaxconn`), so that clients past a busy connection limit
/// wait in the queue rather than have their connection attempts dropped and retried
/// seconds later. Give it [`ServeOptions::max_connections`].
pub fn bind(address: SocketAddr, backlog: usize) -> std::io::Result<TcpListener> {
    let socket = match address {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(u32::try_from(backlog.max(128)).unwrap_or(u32::MAX))
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

/// How long, once the grace has ended, the 503s of the requests still in flight get to
/// reach their clients before the connections are dropped.
const ANSWER_WINDOW: Duration = Duration::from_secs(5);

/// Serves `state`'s router on `listener` (HTTP/1.1 with keep-alive, and HTTP/2: over
/// [`ServeOptions::tls`] by ALPN, else h2c with prior knowledge) until `shutdown`
/// completes. Then it stops accepting and drains: `/ready` answers 503, requests still
/// queued on a limiter (and any that arrive, on connections already open) are answered
/// 503 with `retry-after` and `connection: close`, requests already sent get
/// `options.grace` to finish, and past it are answered 503 too (a stream ends with an
/// error event). Idle connections stay open for `options.drain_linger` once nothing is
/// in flight, then close; it returns when every connection has.
pub async fn serve_with(
    listener: TcpListener,
    state: Gateway,
    shutdown: impl Future<Output = ()> + Send + 'static,
    options: ServeOptions,
) -> std::io::Result<()> {
    serve_live(listener, LiveGateway::new(state), shutdown, options).await
}

/// [`serve_with`] for a [`LiveGateway`]: each request is served by the gateway current
/// when it arrives, so a reload ([`LiveGateway::reload`], or `POST /v1/tollgate/reload`)
/// takes effect for the next request while those in flight finish on theirs.
pub async fn serve_live(
    listener: TcpListener,
    live: Arc<LiveGateway>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    options: ServeOptions,
) -> std::io::Result<()> {
    let app = live.router();
    // The shutdown state is shared by every gateway a reload makes: any one tells it.
    let state = live.current();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    let connections = Connections::new(options.max_connections);
    let mut shutdown = pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, a connection reset before accept: keep
                    // serving the others, and do not spin.
                    tracing::warn!(target: "tollgate_gateway", error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // A client is waiting: room is made for it (the rest wait in the backlog).
        let slot = tokio::select! {
            () = &mut shutdown => break,
            slot = connections.make_room() => slot,
        };
        let _ = stream.set_nodelay(true);
        let connection = connections.open(slot);
        let driven = drive::Driven {
            app: app.clone(),
            builder: builder.clone(),
            tls: options.tls.clone(),
            idle_timeout: options.header_read_timeout,
        };
        tokio::spawn(async move {
            driven.serve(stream, &connection).await;
            connection.close();
        });
    }
    drop(listener);
    state.start_draining();
    let started = clock::now();
    let settled = tokio::time::timeout(options.grace, connections.quiet()).await;
    if settled.is_ok() {
        // Nothing in flight: let late requests on idle connections meet a 503, not a
        // reset, for the linger (within the grace).
        let left = options.grace.saturating_sub(started.elapsed());
        tokio::time::sleep(options.drain_linger.min(left)).await;
    } else {
        tracing::warn!(
            target: "tollgate_gateway",
            grace = ?options.grace,
            "requests still in flight at the end of the shutdown grace are answered 503"
        );
        state.end_grace();
    }
    connections.close_all();
    if tokio::time::timeout(ANSWER_WINDOW, connections.all_closed())
        .await
        .is_err()
    {
        tracing::warn!(target: "tollgate_gateway", "connections still open after the shutdown answers; dropping them");
    }
    Ok(())
}

/// `response` with `busy` held until its body is done (sent, or dropped with the
/// connection), so a streaming answer keeps its connection busy.
fn track(response: Response, busy: Busy) -> Response {
    response.map(|body| Body::new(Tracked { body, _busy: busy }))
}

/// A response body that holds its connection's [`Busy`] mark.
struct Tracked {
    body: Body,
    _busy: Busy,
}

impl http_body::Body for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The connections being served: how many may be, which are idle, and how many
/// requests are in flight across them.
#[derive(Debug, Clone)]
struct Connections {
    max: usize,
    slots: Arc<Semaphore>,
    became_idle: Arc<Notify>,
    open: Arc<Mutex<HashMap<u64, Arc<Connection>>>>,
    next_id: Arc<AtomicU64>,
    in_flight: Arc<watch::Sender<usize>>,
}

impl Connections {
    fn new(max: usize) -> Self {
        Connections {
            max: max.max(1),
            slots: Arc::new(Semaphore::new(max.max(1))),
            became_idle: Arc::default(),
            open: Arc::default(),
            next_id: Arc::default(),
            in_flight: Arc::new(watch::Sender::new(0)),
        }
    }

    /// A slot for one more connection: a free one, else the one an idle connection
    /// gives up when it is closed for it (the longest idle first), else the first that
    /// a busy one gives up when it ends.
    async fn make_room(&self) -> OwnedSemaphorePermit {
        loop {
            if let Ok(permit) = self.slots.clone().try_acquire_owned() {
                return permit;
            }
            // Closed for us, it gives its slot back in a moment.
            let evicted = self.close_longest_idle();
            // Else the first connection to fall idle, or a new one that sends nothing
            // for long enough, can make room.
            let next_idle = self.next_idle_at();
            tokio::select! {
                permit = self.slots.clone().acquire_owned() => match permit {
                    Ok(permit) => return permit,
                    // The semaphore is never closed.
                    Err(_) => std::future::pending::<()>().await,
                },
                () = self.became_idle.notified(), if !evicted => {}
                () = tokio::time::sleep_until(next_idle.unwrap_or_else(clock::now)), if !evicted && next_idle.is_some() => {}
            }
        }
    }

    /// Asks the connection idle longest to close; false when none is idle.
    fn close_longest_idle(&self) -> bool {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let idle = open
            .values()
            .filter(|c| c.is_idle())
            .min_by_key(|c| *c.idle_since.lock().unwrap_or_else(|e| e.into_inner()));
        match idle {
            Some(connection) => {
                connection.ask_to_close();
                true
            }
            None => false,
        }
    }

    /// When the next connection that has sent nothing yet counts as idle, if any.
    fn next_idle_at(&self) -> Option<Instant> {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.values()
            .filter(|c| !c.served.load(Ordering::SeqCst) && !c.is_closing())
            .map(|c| *c.idle_since.lock().unwrap_or_else(|e| e.into_inner()) + FIRST_REQUEST_GRACE)
            .min()
    }

    /// A newly accepted connection, holding `slot` until it closes.
    fn open(&self, slot: OwnedSemaphorePermit) -> Arc<Connection> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let connection = Arc::new(Connection {
            id,
            active: AtomicUsize::new(0),
            served: AtomicBool::new(false),
            idle_since: Mutex::new(clock::now()),
            closing: Notify::new(),
            asked: AtomicBool::new(false),
            all: self.clone(),
            _slot: Mutex::new(Some(slot)),
        });
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, connection.clone());
        connection
    }

    /// Completes when no request is in flight on any connection.
    async fn quiet(&self) {
        let mut in_flight = self.in_flight.subscribe();
        let _ = in_flight.wait_for(|n| *n == 0).await;
    }

    /// Asks every connection to close once its request in flight (if any) is answered.
    fn close_all(&self) {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        for connection in open.values() {
            connection.ask_to_close();
        }
    }

    /// Completes when every connection has closed.
    async fn all_closed(&self) {
        let max = u32::try_from(self.max).unwrap_or(u32::MAX);
        let _ = self.slots.acquire_many(max).await;
    }
}

/// How long a new connection may take to send its first request before it counts as
/// idle (a client that connected a moment ago is not closed for the next one).
const FIRST_REQUEST_GRACE: Duration = Duration::from_secs(1);

/// One connection: its requests in flight and since when it has had none.
#[derive(Debug)]
struct Connection {
    id: u64,
    active: AtomicUsize,
    /// A request has come on it (else it may still be sending its first).
    served: AtomicBool,
    idle_since: Mutex<Instant>,
    closing: Notify,
    asked: AtomicBool,
    all: Connections,
    _slot: Mutex<Option<OwnedSemaphorePermit>>,
}

impl Connection {
    /// A request arrived on it: busy until the mark (and its answer's body) is dropped.
    fn begin(self: &Arc<Self>) -> Busy {
        self.served.store(true, Ordering::SeqCst);
        self.active.fetch_add(1, Ordering::SeqCst);
        self.all.in_flight.send_modify(|n| *n += 1);
        Busy(self.clone())
    }

    fn is_closing(&self) -> bool {
        self.asked.load(Ordering::SeqCst)
    }

    /// Whether it may be closed to make room: nothing in flight, and either done with
    /// a request (a keep-alive connection waiting for the next) or open for
    /// [`FIRST_REQUEST_GRACE`] without sending one.
    fn is_idle(&self) -> bool {
        if self.active.load(Ordering::SeqCst) > 0 || self.is_closing() {
            return false;
        }
        let since = *self.idle_since.lock().unwrap_or_else(|e| e.into_inner());
        self.served.load(Ordering::SeqCst) || since.elapsed() >= FIRST_REQUEST_GRACE
    }

    fn ask_to_close(&self) {
        self.asked.store(true, Ordering::SeqCst);
        self.closing.notify_one();
    }

    /// Completes when the connection is asked to close.
    async fn closing(&self) {
        self.closing.notified().await;
    }

    /// The connection ended: its slot is free.
    fn close(&self) {
        self.all
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
        drop(self._slot.lock().unwrap_or_else(|e| e.into_inner()).take());
    }
}

/// A request in flight on a connection (and its answer's body still being sent).
#[derive(Debug)]
struct Busy(Arc<Connection>);

impl Drop for Busy {
    fn drop(&mut self) {
        let connection = &self.0;
        // Under the lock, so that whoever reads both sees the count and the time agree.
        let mut since = connection
            .idle_since
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if connection.active.fetch_sub(1, Ordering::SeqCst) == 1 {
            *since = clock::now();
            drop(since);
            connection.all.became_idle.notify_one();
        } else {
            drop(since);
        }
        connection
            .all
            .in_flight
            .send_modify(|n| *n = n.saturating_sub(1));
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
