//! A process's first call (issue 22, item 7): fresh OS processes, each building
//! [`tollgate::Models`] from a TOML catalog and streaming one answer through the `openai`
//! or the `openai-compatible` provider from a minimal server on 127.0.0.1 ([`serve`]),
//! which answers every request at once with the same clean 12-chunk stream. The two keys
//! share the codec and the transport; what differs is what the first call prepares
//! before it sends (`openai` counts input tokens with tiktoken, whose table is loaded
//! once per process).
//!
//! `benches/first_call.rs` spawns the processes (the bench binary is its own child) and
//! prints the table; `tests/first_call.rs` checks the server and one call, never a time.

use std::io;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::{Catalog, Conversation, Models, SamplingParams, StreamEvent};
use tollgate_openai as _; // links both keys

use crate::report::{Section, Table, num};
use crate::sim_http::read_message;
use crate::stats::percentile;

/// The keys compared, `openai` first.
pub const KEYS: [&str; 2] = [tollgate_openai::KEY, tollgate_openai::COMPATIBLE_KEY];

/// How many `chat.completion.chunk`s the answer has (a `[DONE]` line follows them).
pub const CHUNKS: usize = 12;

/// The credential's id in the child's store (`openai` requires one; the server ignores it).
const CREDENTIAL: &str = "first-call-key";

/// The body of the one answer [`serve`] gives: a role chunk, nine text chunks, a finish
/// chunk and a usage chunk, then `data: [DONE]`.
pub fn stream_body() -> String {
    let chunk = |delta: &str, finish: &str, usage: &str| {
        format!(
            "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\
             \"choices\":[{}],\"usage\":{usage}}}\n\n",
            if delta.is_empty() {
                String::new()
            } else {
                format!("{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}")
            }
        )
    };
    let mut body = chunk(r#"{"role":"assistant"}"#, "null", "null");
    for word in [
        "One", " two", " three", " four", " five", " six", " seven", " eight", ".",
    ] {
        body += &chunk(&format!(r#"{{"content":"{word}"}}"#), "null", "null");
    }
    body += &chunk("{}", r#""stop""#, "null");
    body += &chunk("", "", r#"{"prompt_tokens":12,"completion_tokens":9}"#);
    body + "data: [DONE]\n\n"
}

/// Serves [`stream_body`] to every request on 127.0.0.1 (a free port), keep-alive;
/// returns the port. Runs until the runtime ends.
pub async fn serve() -> io::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let body = stream_body();
    let answer = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let _ = connection(stream, &answer).await;
            });
        }
    });
    Ok(port)
}

async fn connection(stream: TcpStream, answer: &str) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream);
    while read_message(&mut reader).await?.is_some() {
        reader.get_mut().write_all(answer.as_bytes()).await?;
    }
    Ok(())
}

/// The catalog of the one model `m`: `gpt-4o-mini` on provider `key`, at `base_url`.
pub fn catalog(key: &str, base_url: &str) -> String {
    format!(
        "[models.m]\nprovider = \"{key}\"\nname = \"gpt-4o-mini\"\ncredential = \"{CREDENTIAL}\"\n\
         max_output_tokens = 256\nrpm = 6000\ntpm = 10000000\n\
         [models.m.options]\nbase_url = \"{base_url}\"\n"
    )
}

/// What one process saw of its first call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FirstCall {
    /// From before `Models::build` to the end of the answer.
    pub build_to_answer: Duration,
    /// From the call (`stream_response`) to the end of the answer.
    pub send_to_answer: Duration,
    /// The events the stream delivered, the completed answer included.
    pub events: usize,
}

impl FirstCall {
    /// The line a child prints.
    pub fn line(&self) -> String {
        format!(
            "FIRST_CALL {} {} {}",
            self.build_to_answer.as_nanos(),
            self.send_to_answer.as_nanos(),
            self.events
        )
    }

    /// Reads [`FirstCall::line`].
    pub fn parse(line: &str) -> Option<FirstCall> {
        let mut fields = line.strip_prefix("FIRST_CALL ")?.split(' ');
        let mut nanos =
            || -> Option<Duration> { Some(Duration::from_nanos(fields.next()?.parse().ok()?)) };
        let (build_to_answer, send_to_answer) = (nanos()?, nanos()?);
        let events = fields.next()?.parse().ok()?;
        Some(FirstCall {
            build_to_answer,
            send_to_answer,
            events,
        })
    }
}

// This benchmark measures wall time; this is the one place it reads the wall clock.
#[allow(clippy::disallowed_methods)]
fn wall_now() -> Instant {
    Instant::now()
}

/// The first call of this process: builds `Models` from [`catalog`] for `key`, waits
/// `pause` (an application's own start-up, between building its clients and its first
/// call), opens the chat client and streams one answer to its end. Fails if the stream
/// does not complete.
pub async fn first_call(key: &str, base_url: &str, pause: Duration) -> tollgate::Result<FirstCall> {
    let started = wall_now();
    let models = Models::builder()
        .catalog(Catalog::from_toml_str(&catalog(key, base_url))?)
        .credentials(MemoryCredentialStore::new().with(CREDENTIAL, "sk-first-call"))
        .build()?;
    if !pause.is_zero() {
        tokio::time::sleep(pause).await;
    }
    let chat = models.chat("m").await?;
    let request = Conversation::new()
        .user("Count to eight.")
        .request("m", SamplingParams::new())?;
    let sent = wall_now();
    let mut stream = chat.stream_response(&request).await?;
    let mut events = 0;
    let mut completed = false;
    while let Some(event) = stream.next().await {
        completed |= matches!(event?, StreamEvent::Completed(_));
        events += 1;
    }
    let answered = wall_now();
    if !completed {
        return Err(tollgate::Error::InvalidRequest {
            field: "stream".into(),
            reason: "ended without a completed answer".into(),
        });
    }
    Ok(FirstCall {
        build_to_answer: answered - started,
        send_to_answer: answered - sent,
        events,
    })
}

/// One row's measurements: every process of one key and one pause.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// The provider key.
    pub key: &'static str,
    /// The pause between `Models::build` and the call.
    pub pause: Duration,
    /// Each process's first call.
    pub calls: Vec<FirstCall>,
    /// Each process's life, from spawn to exit.
    pub processes: Vec<Duration>,
}

fn ms(values: impl Iterator<Item = Duration>) -> Vec<f64> {
    values.map(|d| d.as_secs_f64() * 1e3).collect()
}

/// The section: per key and pause, p50 and max of time to answer, from the send and from
/// `Models::build`, and of the whole process.
pub fn section(cells: &[Cell], command: &str) -> Section {
    let mut table = Table::new(&[
        "key",
        "pause after build",
        "processes",
        "send → answer p50 (ms)",
        "max",
        "build → answer p50 (ms)",
        "max",
        "process p50 (ms)",
        "max",
    ]);
    for cell in cells {
        let send = ms(cell.calls.iter().map(|c| c.send_to_answer));
        let build = ms(cell.calls.iter().map(|c| c.build_to_answer));
        let process = ms(cell.processes.iter().copied());
        let p50_max = |v: &[f64]| [num(percentile(v, 0.5), 1), num(percentile(v, 1.0), 1)];
        let mut row = vec![
            format!("`{}`", cell.key),
            format!("{} ms", cell.pause.as_millis()),
            cell.calls.len().to_string(),
        ];
        row.extend(p50_max(&send));
        row.extend(p50_max(&build));
        row.extend(p50_max(&process));
        table.row(row);
    }
    Section {
        title: "First call of a fresh process: `openai` and `openai-compatible`".into(),
        intro: vec![format!(
            "Each row is that many fresh OS processes (release build, started one after \
             another, the keys interleaved), each building `Models` from a TOML catalog of \
             one `gpt-4o-mini` model and streaming one answer: a clean {CHUNKS}-chunk stream \
             from a minimal server on 127.0.0.1 that answers at once. The two keys share \
             the codec and the transport; `openai` also counts input tokens with tiktoken. \
             Command: `{command}`."
        )],
        table,
        notes: vec![
            "send → answer: from `stream_response` to the end of the stream (the \
             completed answer); build → answer: from before `Models::build`, the pause and \
             `Models::chat` included; process: from spawn to exit."
                .into(),
            "pause after build: the time an application spends between building its \
             clients and its first call (here a sleep)."
                .into(),
        ],
    }
}
