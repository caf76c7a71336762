//! The simulated provider ([`SimProvider`]) served over HTTP/1.1 on loopback, so that
//! several OS processes can call one provider that enforces one limit; and the matching
//! keep-alive client. Deliberately minimal: one route, a body of three numbers
//! (`input max_output actual`), answers `200`, or `429` with `retry-after` (whole
//! seconds), or `529`.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tollgate_sim::{SimProvider, SimRefusal, SimRequest};

/// Serves `provider` on 127.0.0.1 (a free port); returns the port. Runs until the runtime
/// ends.
pub async fn serve(provider: SimProvider) -> io::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let provider = provider.clone();
            tokio::spawn(async move {
                let _ = connection(stream, provider).await;
            });
        }
    });
    Ok(port)
}

/// Reads one request's headers and body; `None` at the end of the stream.
pub(crate) async fn read_message(
    reader: &mut BufReader<TcpStream>,
) -> io::Result<Option<(String, Vec<u8>)>> {
    let mut first = String::new();
    if reader.read_line(&mut first).await? == 0 {
        return Ok(None);
    }
    let mut length = 0usize;
    let mut retry_after = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let name = name.trim().to_ascii_lowercase();
            if name == "content-length" {
                length = value.trim().parse().unwrap_or(0);
            } else if name == "retry-after" {
                retry_after = value.trim().to_owned();
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    let head = if retry_after.is_empty() {
        first.trim_end().to_owned()
    } else {
        format!("{} retry-after={retry_after}", first.trim_end())
    };
    Ok(Some((head, body)))
}

async fn connection(stream: TcpStream, provider: SimProvider) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream);
    while let Some((_, body)) = read_message(&mut reader).await? {
        let text = String::from_utf8_lossy(&body);
        let mut n = text
            .split_whitespace()
            .map(|x| x.parse::<u64>().unwrap_or(0));
        let request = SimRequest::new(
            n.next().unwrap_or(0),
            n.next().unwrap_or(0),
            n.next().unwrap_or(0),
        );
        let answer = match provider.call(request).await {
            Ok(_) => "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_owned(),
            Err(SimRefusal::RateLimited { retry_after }) => format!(
                "HTTP/1.1 429 Too Many Requests\r\nretry-after: {}\r\ncontent-length: 0\r\n\r\n",
                retry_after.map_or(1, |d| d.as_secs().max(1))
            ),
            Err(SimRefusal::Overloaded) => {
                "HTTP/1.1 529 Overloaded\r\ncontent-length: 0\r\n\r\n".to_owned()
            }
        };
        reader.get_mut().write_all(answer.as_bytes()).await?;
    }
    Ok(())
}

/// What the provider answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// 200.
    Ok,
    /// 429, with its `retry-after`.
    RateLimited(Option<Duration>),
    /// Anything else.
    Other(u16),
}

/// A keep-alive connection to [`serve`].
#[derive(Debug)]
pub struct Client {
    reader: BufReader<TcpStream>,
}

impl Client {
    /// Connects to 127.0.0.1:`port`.
    pub async fn connect(port: u16) -> io::Result<Client> {
        let stream = TcpStream::connect(("127.0.0.1", port)).await?;
        stream.set_nodelay(true)?;
        Ok(Client {
            reader: BufReader::new(stream),
        })
    }

    /// One call.
    pub async fn call(&mut self, request: SimRequest) -> io::Result<Answer> {
        let body = format!(
            "{} {} {}",
            request.input_tokens, request.max_output, request.actual_output
        );
        let message = format!(
            "POST /call HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        self.reader.get_mut().write_all(message.as_bytes()).await?;
        let Some((head, _)) = read_message(&mut self.reader).await? else {
            return Err(io::ErrorKind::UnexpectedEof.into());
        };
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        Ok(match status {
            200 => Answer::Ok,
            429 => Answer::RateLimited(
                head.split_once("retry-after=")
                    .and_then(|(_, s)| s.parse().ok())
                    .map(Duration::from_secs),
            ),
            other => Answer::Other(other),
        })
    }
}
