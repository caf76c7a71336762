//! The stream decoder shell every text-framed codec shares: a codec writes how one
//! event's text becomes [`StreamEvent`]s ([`ChunkDecoder`]); [`StreamDecoder`] adds the
//! rest (an undecodable event keeps its bytes, the pump's [`EventDecoder`]).

use crate::error::{ProviderError, Result};
use crate::stream::StreamEvent;

use super::events::EventDecoder;
use super::malformed::keep_raw;

/// A codec's part of decoding a text stream (SSE `data`, NDJSON lines): one event's text
/// in, the [`StreamEvent`]s it completes out. Wrapped in a [`StreamDecoder`].
pub trait ChunkDecoder: Send + 'static {
    /// Decodes one event's text. Report what is wrong with
    /// [`undecodable`](super::undecodable); the shell adds the event's bytes.
    fn chunk(&mut self, data: &str) -> Result<Vec<StreamEvent>>;

    /// Whether the answer is complete ([`StreamEvent::Completed`] returned).
    fn is_finished(&self) -> bool;

    /// The body ended before [`is_finished`](Self::is_finished). By default the answer
    /// was cut ([`ProviderError::Connection`] closed early); a codec whose streams end
    /// with the connection (no last event) completes the answer here.
    fn ended(&mut self) -> Result<Vec<StreamEvent>> {
        Err(ProviderError::closed_early("the stream ended before its last event").into())
    }
}

/// A codec's [`ChunkDecoder`] as the [`EventDecoder`] the stream pump drives, and as a
/// decoder tests and fuzz targets feed by hand: `event`, `is_finished`, `end`.
///
/// ```
/// use tollgate::wire::{ChunkDecoder, StreamDecoder, undecodable};
/// use tollgate::{ProviderError, Result, StreamEvent, Error};
///
/// #[derive(Debug, Default)]
/// struct Lines { done: bool }
/// impl ChunkDecoder for Lines {
///     fn chunk(&mut self, data: &str) -> Result<Vec<StreamEvent>> {
///         match data {
///             "end" => { self.done = true; Ok(Vec::new()) }
///             "" => Err(undecodable("an empty line")),
///             _ => Ok(vec![StreamEvent::TextDelta { index: 0, text: data.into() }]),
///         }
///     }
///     fn is_finished(&self) -> bool { self.done }
/// }
///
/// let mut decoder = StreamDecoder::<Lines>::new();
/// assert_eq!(decoder.event("hi")?.len(), 1);
/// assert!(decoder.event("").is_err());
/// decoder.event("end")?;
/// assert!(decoder.is_finished());
/// # Ok::<(), tollgate::Error>(())
/// ```
#[derive(Debug, Default, Clone)]
pub struct StreamDecoder<C> {
    codec: C,
}

impl<C: ChunkDecoder + Default> StreamDecoder<C> {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<C: ChunkDecoder> StreamDecoder<C> {
    /// A decoder around `codec` (one configured for its server).
    pub fn with(codec: C) -> Self {
        StreamDecoder { codec }
    }

    /// Decodes one event's text; returns the events it produces (often none). A
    /// malformed event is [`ProviderError::Malformed`] with the event's first bytes.
    pub fn event(&mut self, data: &str) -> Result<Vec<StreamEvent>> {
        self.codec
            .chunk(data)
            .map_err(|e| keep_raw(e, data.as_bytes()))
    }

    /// Whether the answer is complete.
    pub fn is_finished(&self) -> bool {
        self.codec.is_finished()
    }

    /// The body ended: what the codec makes of that ([`ChunkDecoder::ended`]); nothing
    /// once the answer is complete.
    pub fn end(&mut self) -> Result<Vec<StreamEvent>> {
        if self.codec.is_finished() {
            return Ok(Vec::new());
        }
        self.codec.ended()
    }

    /// The codec inside.
    pub fn codec(&self) -> &C {
        &self.codec
    }
}

impl<C: ChunkDecoder> EventDecoder for StreamDecoder<C> {
    fn event(&mut self, data: String) -> Result<Vec<StreamEvent>> {
        StreamDecoder::event(self, &data)
    }

    fn is_finished(&self) -> bool {
        StreamDecoder::is_finished(self)
    }

    fn ended(&mut self) -> Result<Vec<StreamEvent>> {
        self.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[derive(Debug, Default)]
    struct Ends {
        finished: bool,
    }

    impl ChunkDecoder for Ends {
        fn chunk(&mut self, data: &str) -> Result<Vec<StreamEvent>> {
            if data == "end" {
                self.finished = true;
                return Ok(Vec::new());
            }
            Err(super::super::undecodable("not `end`"))
        }
        fn is_finished(&self) -> bool {
            self.finished
        }
    }

    #[test]
    fn a_malformed_event_keeps_its_bytes() {
        let mut decoder = StreamDecoder::<Ends>::new();
        let Err(Error::Provider(ProviderError::Malformed { raw, what, .. })) =
            decoder.event("{\"x\":1}")
        else {
            panic!("not malformed")
        };
        assert_eq!((raw.as_str(), what.as_str()), ("{\"x\":1}", "not `end`"));
    }

    #[test]
    fn the_end_of_a_finished_stream_is_nothing_and_of_a_cut_one_closed_early() {
        let mut cut = StreamDecoder::<Ends>::new();
        assert!(matches!(
            cut.end(),
            Err(Error::Provider(ProviderError::Connection { .. }))
        ));
        let mut done = StreamDecoder::<Ends>::new();
        done.event("end").unwrap();
        assert!(done.end().unwrap().is_empty());
    }
}
