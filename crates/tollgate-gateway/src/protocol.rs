//! Requests that are not HTTP enough for the router: hyper answers a request it cannot
//! parse (a malformed `Content-Length`, too many or too large headers, a URI too long)
//! itself, with an empty body that an SDK reports as "Error code: 400" and nothing more.
//! [`JsonErrors`] wraps a connection's socket and rewrites exactly that answer into one
//! with an error body both dialects' SDKs read (`error.message`, `error.type`), so every
//! refusal says what was wrong.
//!
//! hyper writes such an answer only as the last bytes of a connection, and always as
//! `HTTP/1.1 <status> <reason>`, `connection: close`, `content-length: 0`, `date: …`;
//! the router's own
//! answers never have an empty error body, so nothing else matches.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use hyper::rt::{Read, ReadBufCursor, Write};
use serde_json::json;

/// A connection's socket, its automatic parse-error answers given a JSON body.
#[derive(Debug)]
pub(crate) struct JsonErrors<T> {
    inner: T,
    /// A rewritten answer still being written: the bytes, how many are out, and the
    /// length of the write it replaces (reported once all are out).
    pending: Option<(Vec<u8>, usize, usize)>,
}

impl<T> JsonErrors<T> {
    pub(crate) fn new(inner: T) -> Self {
        JsonErrors {
            inner,
            pending: None,
        }
    }
}

impl<T: Read + Unpin> Read for JsonErrors<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> JsonErrors<T> {
    /// Writes the rewritten answer out; once all of it is, reports the replaced write's
    /// length as written.
    fn drive_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let Some((bytes, written, replaced)) = &mut self.pending else {
            return Poll::Ready(Ok(0));
        };
        while *written < bytes.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        let replaced = *replaced;
        self.pending = None;
        Poll::Ready(Ok(replaced))
    }
}

impl<T: Write + Unpin> Write for JsonErrors<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.pending.is_none() {
            match rewritten(buf) {
                Some(bytes) => this.pending = Some((bytes, 0, buf.len())),
                None => return Pin::new(&mut this.inner).poll_write(cx, buf),
            }
        }
        this.drive_pending(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.pending.is_none() {
            // hyper writes an automatic answer's head as one buffer, the last one: only
            // then are the slices joined and looked at (the bodies pass as they are).
            let last = bufs.iter().rev().find(|b| !b.is_empty());
            if !last.is_some_and(|b| ends_like_an_answer(b)) {
                return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
            }
            let joined: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            match rewritten(&joined) {
                Some(bytes) => this.pending = Some((bytes, 0, joined.len())),
                None => return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs),
            }
        }
        this.drive_pending(cx)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Whether `buf` could end with an automatic answer: a head's blank line (a cheap
/// first look, so a body's bytes are scanned no further).
fn ends_like_an_answer(buf: &[u8]) -> bool {
    buf.ends_with(b"\r\n\r\n")
}

/// `buf` with hyper's automatic answer at its end replaced by one with a JSON body, or
/// `None` when it ends with no such answer.
fn rewritten(buf: &[u8]) -> Option<Vec<u8>> {
    if !ends_like_an_answer(buf) {
        return None;
    }
    // The answer is short: look only at the tail.
    let from = buf.len().saturating_sub(160);
    let tail = &buf[from..];
    let at = tail.windows(9).rposition(|w| w == b"HTTP/1.1 ")?;
    let head = std::str::from_utf8(&tail[at..]).ok()?;
    let status = automatic_status(head)?;
    let (message, code) = match status {
        400 => (
            "the request is not valid HTTP/1.1 (a malformed request line, header or \
             Content-Length); nothing was sent to a model",
            "malformed_http",
        ),
        414 => (
            "the request's URI is longer than the gateway accepts",
            "uri_too_long",
        ),
        431 => (
            "the request's headers are larger (or more numerous) than the gateway accepts",
            "headers_too_large",
        ),
        _ => return None,
    };
    // Read by both dialects' SDKs: OpenAI's `error.{message,type,code}`, Anthropic's
    // `type` and `error.{type,message}`.
    let body = json!({
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": message,
            "code": code,
            "param": null,
        },
    })
    .to_string();
    let reason = head.lines().next()?.get(13..)?.trim();
    let mut out = buf[..from + at].to_vec();
    out.extend_from_slice(
        format!(
            "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    Some(out)
}

/// The status of `head` when it is one of hyper's automatic answers: a status line, an
/// empty body's `content-length: 0`, `connection: close`, a `date`, and the blank line
/// that ends it all.
fn automatic_status(head: &str) -> Option<u16> {
    let rest = head.strip_suffix("\r\n\r\n")?;
    let mut lines = rest.split("\r\n");
    let status: u16 = lines.next()?.get(9..12)?.parse().ok()?;
    let mut empty = false;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        match name.to_ascii_lowercase().as_str() {
            "content-length" if value.trim() == "0" => empty = true,
            "date" => {}
            "connection" if value.trim().eq_ignore_ascii_case("close") => {}
            _ => return None,
        }
    }
    (empty && matches!(status, 400 | 414 | 431)).then_some(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    // As hyper 1.12 writes it.
    const AUTOMATIC: &[u8] = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\ndate: Wed, 02 Dec 2026 05:00:00 GMT\r\n\r\n";

    #[test]
    fn hypers_automatic_answer_gets_a_json_body_both_dialects_read() {
        let out = rewritten(AUTOMATIC).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
        let (_, body) = text.split_once("\r\n\r\n").unwrap();
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["type"], "error");
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert_eq!(v["error"]["code"], "headers_too_large");
        assert!(text.contains(&format!("content-length: {}\r\n", body.len())));
    }

    #[test]
    fn an_earlier_answer_in_the_same_write_is_kept_before_the_rewritten_one() {
        let mut buf = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_vec();
        buf.extend_from_slice(AUTOMATIC);
        let out = rewritten(&buf).unwrap();
        assert!(out.starts_with(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 431"));
    }

    #[test]
    fn the_routers_own_answers_pass_unchanged() {
        for own in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"[..],
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\ndate: Wed, 02 Dec 2026 05:00:00 GMT\r\n\r\n",
            b"data: HTTP/1.1 400 Bad Request\r\n\r\n",
        ] {
            assert!(rewritten(own).is_none(), "{}", String::from_utf8_lossy(own));
        }
    }
}
