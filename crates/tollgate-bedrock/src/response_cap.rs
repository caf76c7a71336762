//! The model's `max_response_bytes` for Bedrock, whose answers the AWS SDK reads itself:
//! an SDK interceptor ([`ResponseCap`]) puts a counting body ([`Capped`]) in front of
//! every answer before the SDK deserializes it, so that reading stops at the limit and
//! memory stays bounded, as it does for the providers whose bodies tollgate reads.
//!
//! What counts is what the catalog's limit means, "a whole body, or one stream event":
//!
//! - a whole answer (JSON: a Converse or InvokeModel answer, any error answer) counts
//!   every byte; past the limit the body fails;
//! - an event stream (`application/vnd.amazon.eventstream`) counts each message: a
//!   message's prelude opens with its total length (4 bytes, big-endian; AWS event-stream
//!   encoding), read as the bytes go by, so a message longer than the limit fails the
//!   body before the SDK's decoder buffers it.
//!
//! The failure is [`TooLarge`], which the SDK hands back inside its own error (a
//! response error for a whole answer, a dispatch failure for a stream);
//! [`too_large`] finds it there and makes it [`Error::ResponseTooLarge`].

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use aws_sdk_bedrockruntime::config::interceptors::BeforeDeserializationInterceptorContextMut;
use aws_sdk_bedrockruntime::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_bedrockruntime::error::BoxError;
use aws_smithy_types::body::SdkBody;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tollgate::provider::{Error, ModelEntry};

/// The content type of an AWS event stream.
pub(crate) const EVENT_STREAM: &str = "application/vnd.amazon.eventstream";

/// An answer (or one event-stream message) larger than the model's limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the answer from model `{model_id}` is larger than its limit of {limit_bytes} bytes")]
pub(crate) struct TooLarge {
    model_id: String,
    limit_bytes: u64,
}

impl TooLarge {
    fn error(&self) -> Error {
        Error::ResponseTooLarge {
            model_id: self.model_id.clone(),
            limit_bytes: self.limit_bytes,
        }
    }
}

/// The [`Error::ResponseTooLarge`] a failure means, when a [`TooLarge`] is in its chain
/// of causes.
pub(crate) fn too_large(error: &(dyn std::error::Error + 'static)) -> Option<Error> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(found) = e.downcast_ref::<TooLarge>() {
            return Some(found.error());
        }
        // An I/O error's `source` skips the error it wraps: look at that one first.
        next = match e
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    None
}

/// What counts against the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Counter {
    /// Every byte of the body.
    Whole { read: u64 },
    /// Each event-stream message: `left` bytes of the current one still to come, then the
    /// next one's total length, `have` of its 4 bytes read so far.
    Messages {
        left: u64,
        length: [u8; 4],
        have: usize,
    },
}

impl Counter {
    fn new(event_stream: bool) -> Self {
        if event_stream {
            Counter::Messages {
                left: 0,
                length: [0; 4],
                have: 0,
            }
        } else {
            Counter::Whole { read: 0 }
        }
    }

    /// Counts `data`; `false` when it takes the body (or a message) past `limit`.
    fn take(&mut self, mut data: &[u8], limit: u64) -> bool {
        match self {
            Counter::Whole { read } => {
                *read = read.saturating_add(data.len() as u64);
                *read <= limit
            }
            Counter::Messages { left, length, have } => {
                while !data.is_empty() {
                    if *left > 0 {
                        let n = usize::try_from(*left).unwrap_or(usize::MAX).min(data.len());
                        *left -= n as u64;
                        data = &data[n..];
                        continue;
                    }
                    let n = (4 - *have).min(data.len());
                    length[*have..*have + n].copy_from_slice(&data[..n]);
                    *have += n;
                    data = &data[n..];
                    if *have == 4 {
                        *have = 0;
                        let total = u64::from(u32::from_be_bytes(*length));
                        if total > limit {
                            return false;
                        }
                        // The 4 bytes just read are the message's first. A length under
                        // 4 is no message at all: the SDK's decoder says so.
                        *left = total.saturating_sub(4);
                    }
                }
                true
            }
        }
    }
}

/// A body that fails with [`TooLarge`] once what it counts passes the limit, and reads
/// nothing more.
#[derive(Debug)]
pub(crate) struct Capped {
    inner: SdkBody,
    counter: Counter,
    too_large: TooLarge,
    failed: bool,
}

impl Capped {
    fn new(inner: SdkBody, event_stream: bool, too_large: TooLarge) -> Self {
        Capped {
            inner,
            counter: Counter::new(event_stream),
            too_large,
            failed: false,
        }
    }
}

impl Body for Capped {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        let frame = ready!(Pin::new(&mut this.inner).poll_frame(cx));
        if let Some(Ok(data)) = frame.as_ref().map(|f| f.as_ref().map(Frame::data_ref)) {
            let fits =
                data.is_none_or(|bytes| this.counter.take(bytes, this.too_large.limit_bytes));
            if !fits {
                this.failed = true;
                return Poll::Ready(Some(Err(Box::new(this.too_large.clone()))));
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The SDK interceptor that caps one model's answers at its `max_response_bytes`.
#[derive(Debug, Clone)]
pub(crate) struct ResponseCap {
    too_large: TooLarge,
}

impl ResponseCap {
    /// The cap of `model`: its catalog `max_response_bytes`, else the default for its kind.
    pub(crate) fn new(model: &ModelEntry) -> Self {
        ResponseCap {
            too_large: TooLarge {
                model_id: model.id.clone(),
                limit_bytes: model.response_byte_limit(),
            },
        }
    }
}

impl Intercept for ResponseCap {
    fn name(&self) -> &'static str {
        "tollgate::ResponseCap"
    }

    fn modify_before_deserialization(
        &self,
        context: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let response = context.response_mut();
        let event_stream = response
            .headers()
            .get("content-type")
            .is_some_and(|t| t.starts_with(EVENT_STREAM));
        let body = std::mem::replace(response.body_mut(), SdkBody::taken());
        let too_large = self.too_large.clone();
        *response.body_mut() = body.map(move |inner| {
            SdkBody::from_body_1_x(Capped::new(inner, event_stream, too_large.clone()))
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    fn cap(limit: u64) -> TooLarge {
        TooLarge {
            model_id: "m".into(),
            limit_bytes: limit,
        }
    }

    fn is_cap(error: Option<Error>, limit: u64) -> bool {
        matches!(error, Some(Error::ResponseTooLarge { model_id, limit_bytes })
            if model_id == "m" && limit_bytes == limit)
    }

    /// Reads `chunks` through a capped body: the bytes read before it ended, and whether
    /// it failed too large.
    async fn read(chunks: Vec<Vec<u8>>, event_stream: bool, limit: u64) -> (usize, bool) {
        let stream = futures::stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, std::io::Error>(Frame::data(Bytes::from(c)))),
        );
        let inner = SdkBody::from_body_1_x(http_body_util::StreamBody::new(stream));
        let mut body = Capped::new(inner, event_stream, cap(limit));
        let mut read = 0;
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(frame) => read += frame.data_ref().map_or(0, Bytes::len),
                Err(e) => {
                    assert!(is_cap(too_large(e.as_ref()), limit), "{e}");
                    return (read, true);
                }
            }
        }
        (read, false)
    }

    /// An event-stream message of `total` bytes (its prelude's length; the rest filler).
    fn message(total: u32) -> Vec<u8> {
        let mut out = total.to_be_bytes().to_vec();
        out.resize(total as usize, 0);
        out
    }

    #[tokio::test]
    async fn a_whole_body_at_the_limit_is_read_and_one_byte_more_fails() {
        assert_eq!(
            read(vec![vec![1; 60], vec![1; 40]], false, 100).await,
            (100, false)
        );
        assert_eq!(
            read(vec![vec![1; 60], vec![1; 41]], false, 100).await,
            (60, true)
        );
    }

    #[tokio::test]
    async fn event_stream_messages_each_under_the_limit_pass_whatever_their_sum() {
        let chunks = vec![message(80), message(80), message(80)];
        assert_eq!(read(chunks, true, 100).await, (240, false));
    }

    #[tokio::test]
    async fn an_event_stream_message_over_the_limit_fails_on_its_prelude() {
        // Its length arrives split over two chunks; the body fails before the message.
        let big = message(1000);
        let chunks = vec![message(50), big[..2].to_vec(), big[2..].to_vec()];
        assert_eq!(read(chunks, true, 100).await, (52, true));
    }

    #[tokio::test]
    async fn messages_sharing_a_chunk_are_each_counted() {
        let mut chunk = message(90);
        chunk.extend(message(101));
        assert_eq!(read(vec![chunk], true, 100).await, (0, true));
        let mut chunk = message(90);
        chunk.extend(message(100));
        assert_eq!(read(vec![chunk], true, 100).await, (190, false));
    }

    #[test]
    fn too_large_is_found_under_the_sdks_errors() {
        use aws_sdk_bedrockruntime::error::{ConnectorError, SdkError};
        // A whole answer's read fails as a response error, a stream's as a dispatch failure.
        let response: SdkError<std::io::Error, ()> = SdkError::response_error(cap(7), ());
        assert!(is_cap(too_large(&response), 7));
        let dispatch: SdkError<std::io::Error, ()> =
            SdkError::dispatch_failure(ConnectorError::io(Box::new(cap(7))));
        assert!(is_cap(too_large(&dispatch), 7));
        let io = std::io::Error::other(Box::new(cap(7)) as BoxError);
        assert!(is_cap(too_large(&io), 7));
        assert!(too_large(&std::io::Error::other("other")).is_none());
    }
}
