//! A scripted HTTP/1.1 server on 127.0.0.1 that can do what a mock library cannot:
//! drop the connection before the headers or mid-body, end a chunked stream early,
//! stall, or send a body larger than any client should keep.
//!
//! Replies are served in the order they were queued; the last one repeats. Every
//! request is recorded with its headers and body.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The request line's method.
    pub method: String,
    /// The request line's target (path and query).
    pub path: String,
    /// Header names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Recorded {
    /// The first header called `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The token of an `authorization: Bearer …` header (how most providers send a key:
    /// a script's `sent_identity` for them).
    pub fn bearer(&self) -> Option<String> {
        let auth = self.header("authorization")?;
        auth.strip_prefix("Bearer ").map(str::to_owned)
    }

    /// The strings of the JSON body's array at `pointer` (e.g. `/input`, an embeddings
    /// request's texts); empty when there is none.
    pub fn strings(&self, pointer: &str) -> Vec<String> {
        let json = self.json();
        let items = json.pointer(pointer).and_then(|v| v.as_array());
        items
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    }

    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// How a reply's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Properly: the body is complete.
    Clean,
    /// The connection is closed mid-body (the client sees the message cut short).
    Drop,
    /// Nothing more is sent for this long, then the connection is closed.
    Stall(Duration),
}

/// What the server sends for one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Closes the connection without sending anything (not even a status line).
    Hangup,
    /// A status, headers and a body.
    Respond {
        /// The HTTP status.
        status: u16,
        /// Extra headers (`content-length` / `transfer-encoding` are written by the server).
        headers: Vec<(String, String)>,
        /// The body.
        body: Body,
    },
}

/// A reply's body.
#[derive(Debug, Clone)]
pub enum Body {
    /// The whole body at once, with its `content-length`.
    Full(Vec<u8>),
    /// Chunked: each frame is written (and flushed) as one chunk, then `end`.
    Frames(Vec<Vec<u8>>, End),
    /// Chunked, one byte at a time with `every` between them (a slow drip), then the
    /// end.
    Drip {
        /// The bytes.
        bytes: Vec<u8>,
        /// The pause before each byte.
        every: Duration,
    },
    /// `prefix` then filler bytes, `len` bytes in all, with its `content-length`: a
    /// body too large to keep, written without holding it in memory.
    Huge {
        /// The first bytes (e.g. the opening of a JSON document).
        prefix: Vec<u8>,
        /// The whole length.
        len: usize,
    },
}

impl Reply {
    /// `status` with a JSON body.
    pub fn json(status: u16, body: &serde_json::Value) -> Reply {
        Reply::Respond {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: Body::Full(body.to_string().into_bytes()),
        }
    }

    /// `status` with `body` as given, typed `content_type`.
    pub fn raw(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
        Reply::Respond {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            body: Body::Full(body.into()),
        }
    }

    /// A 200 whose chunked body is `frames`, then `end`.
    pub fn frames(content_type: &str, frames: Vec<Vec<u8>>, end: End) -> Reply {
        Reply::Respond {
            status: 200,
            headers: vec![("content-type".into(), content_type.into())],
            body: Body::Frames(frames, end),
        }
    }

    /// The same reply with `name: value` added (ignored by [`Reply::Hangup`]).
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Reply {
        if let Reply::Respond { headers, .. } = &mut self {
            headers.push((name.to_ascii_lowercase(), value.into()));
        }
        self
    }

    /// The status, if the reply sends one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Reply::Hangup => None,
            Reply::Respond { status, .. } => Some(*status),
        }
    }
}

/// A reply that may look at the request it answers (to echo a header, say).
pub type Responder = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;

#[derive(Default)]
struct State {
    replies: VecDeque<Responder>,
    requests: Vec<Recorded>,
}

/// A port of 127.0.0.1 that refuses every connection for as long as this value lives:
/// bound but never listening, so no other test can take it (a port freed after a bind
/// can be handed to a concurrent test's server, which then answers instead of refusing).
#[derive(Debug)]
pub struct RefusingPort {
    _socket: tokio::net::TcpSocket,
    port: u16,
}

impl RefusingPort {
    /// Binds a free port without listening on it.
    pub fn bind() -> RefusingPort {
        let socket = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
        socket
            .bind("127.0.0.1:0".parse().expect("an address"))
            .expect("bind 127.0.0.1");
        let port = socket.local_addr().expect("local address").port();
        RefusingPort {
            _socket: socket,
            port,
        }
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`.
    pub fn uri(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// The server; stops when dropped.
pub struct ScriptServer {
    uri: String,
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for ScriptServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptServer")
            .field("uri", &self.uri)
            .finish_non_exhaustive()
    }
}

impl ScriptServer {
    /// Listens on a free port of 127.0.0.1.
    pub async fn start() -> ScriptServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let uri = format!("http://{}", listener.local_addr().expect("local address"));
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, shared.clone()));
            }
        });
        ScriptServer { uri, state, task }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// Queues `reply`; replies go out in order and the last one repeats.
    pub fn reply(&self, reply: Reply) -> &Self {
        self.respond(move |_| reply.clone())
    }

    /// Drops every queued reply and serves `reply` from now on.
    pub fn only(&self, reply: Reply) -> &Self {
        self.lock().replies.clear();
        self.reply(reply)
    }

    /// Drops every queued reply and serves `replies` in order, the last repeating.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) -> &Self {
        self.lock().replies.clear();
        for reply in replies {
            self.reply(reply);
        }
        self
    }

    /// Queues a reply made from the request it answers.
    pub fn respond(&self, reply: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> &Self {
        self.lock().replies.push_back(Arc::new(reply));
        self
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    /// How many requests were received.
    pub fn hits(&self) -> usize {
        self.lock().requests.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for ScriptServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut socket: TcpStream, state: Arc<Mutex<State>>) {
    let mut buffer = Vec::new();
    loop {
        let Some(request) = read_request(&mut socket, &mut buffer).await else {
            return;
        };
        let responder = {
            let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
            state.requests.push(request.clone());
            if state.replies.len() > 1 {
                state.replies.pop_front()
            } else {
                state.replies.front().cloned()
            }
        };
        let reply = match responder {
            Some(responder) => responder(&request),
            None => Reply::raw(500, "text/plain", "the script has no reply queued"),
        };
        if !write_reply(&mut socket, reply).await {
            return;
        }
    }
}

/// Reads one request (headers, then a `content-length` or chunked body).
async fn read_request(socket: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<Recorded> {
    let head_end = loop {
        if let Some(at) = find(buffer, b"\r\n\r\n") {
            break at;
        }
        read_more(socket, buffer).await?;
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    buffer.drain(..head_end + 4);
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let value = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let body = if value("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        read_chunked(socket, buffer).await?
    } else {
        let len: usize = value("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buffer.len() < len {
            read_more(socket, buffer).await?;
        }
        buffer.drain(..len).collect()
    };
    Some(Recorded {
        method,
        path,
        headers,
        body,
    })
}

async fn read_chunked(socket: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(at) = find(buffer, b"\r\n") {
                break at;
            }
            read_more(socket, buffer).await?;
        };
        let size_text = String::from_utf8_lossy(&buffer[..line_end]).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        buffer.drain(..line_end + 2);
        while buffer.len() < size + 2 {
            read_more(socket, buffer).await?;
        }
        body.extend(buffer.drain(..size));
        buffer.drain(..2);
        if size == 0 {
            return Some(body);
        }
    }
}

async fn read_more(socket: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 8192];
    match socket.read(&mut chunk).await {
        Ok(0) | Err(_) => None,
        Ok(n) => {
            buffer.extend_from_slice(&chunk[..n]);
            Some(())
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Writes `reply`; `false` when the connection is to be closed.
async fn write_reply(socket: &mut TcpStream, reply: Reply) -> bool {
    let Reply::Respond {
        status,
        headers,
        body,
    } = reply
    else {
        return false;
    };
    // One request per connection: every attempt opens its own, so what one reply left
    // on a connection (a cut, a stall) never meets the next attempt.
    let mut head = format!("HTTP/1.1 {status} Scripted\r\nconnection: close\r\n");
    for (name, value) in &headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    match body {
        Body::Full(bytes) => {
            head.push_str(&format!("content-length: {}\r\n\r\n", bytes.len()));
            let mut out = head.into_bytes();
            out.extend_from_slice(&bytes);
            let _ = socket.write_all(&out).await;
            false
        }
        Body::Huge { prefix, len } => {
            head.push_str(&format!("content-length: {len}\r\n\r\n"));
            if socket.write_all(head.as_bytes()).await.is_err()
                || socket.write_all(&prefix).await.is_err()
            {
                return false;
            }
            let filler = vec![b' '; 64 << 10];
            let mut left = len.saturating_sub(prefix.len());
            while left > 0 {
                let n = left.min(filler.len());
                // The client may stop reading once it has seen enough: that is the point.
                if socket.write_all(&filler[..n]).await.is_err() {
                    return false;
                }
                left -= n;
            }
            false
        }
        Body::Drip { bytes, every } => {
            head.push_str("transfer-encoding: chunked\r\n\r\n");
            if socket.write_all(head.as_bytes()).await.is_err() {
                return false;
            }
            for byte in bytes {
                tokio::time::sleep(every).await;
                let chunk = [b'1', b'\r', b'\n', byte, b'\r', b'\n'];
                if socket.write_all(&chunk).await.is_err() || socket.flush().await.is_err() {
                    return false;
                }
            }
            let _ = socket.write_all(b"0\r\n\r\n").await;
            false
        }
        Body::Frames(frames, end) => {
            head.push_str("transfer-encoding: chunked\r\n\r\n");
            if socket.write_all(head.as_bytes()).await.is_err() {
                return false;
            }
            for frame in frames.iter().filter(|f| !f.is_empty()) {
                let mut chunk = format!("{:x}\r\n", frame.len()).into_bytes();
                chunk.extend_from_slice(frame);
                chunk.extend_from_slice(b"\r\n");
                if socket.write_all(&chunk).await.is_err() || socket.flush().await.is_err() {
                    return false;
                }
            }
            match end {
                End::Clean => {
                    let _ = socket.write_all(b"0\r\n\r\n").await;
                    false
                }
                End::Drop => {
                    let _ = socket.shutdown().await;
                    false
                }
                End::Stall(pause) => {
                    tokio::time::sleep(pause).await;
                    let _ = socket.shutdown().await;
                    false
                }
            }
        }
    }
}
