//! Token estimates before sending: the limiter and the spend cap need a number before
//! the provider has counted anything.
//!
//! The default is deliberately conservative (it over-counts), because an under-estimate
//! becomes debt in the limiter and a surprise in the spend cap, while an over-estimate is
//! simply refunded at settle time. Provider crates with a real tokenizer override
//! [`super::ChatTransport::estimate_input_tokens`].

use crate::conversation::{Block, DocumentSource};
use crate::request::LlmRequest;

/// Estimates tokens for text and requests.
pub trait TokenEstimator: Send + Sync {
    /// Tokens in `text`.
    fn estimate_text(&self, text: &str) -> u64;

    /// Input tokens of a whole request: every block, tool definitions and a per-message
    /// overhead for role markers.
    fn estimate_request(&self, request: &LlmRequest) -> u64 {
        let blocks: u64 = request
            .messages()
            .iter()
            .flat_map(|m| &m.content)
            .map(|b| self.estimate_block(b) + MESSAGE_OVERHEAD_TOKENS)
            .sum();
        let tools: u64 = request
            .tools_schema()
            .iter()
            .map(|t| {
                self.estimate_text(&t.name)
                    + self.estimate_text(&t.description)
                    + self.estimate_text(&t.input_schema.canonical())
            })
            .sum();
        blocks + tools + REQUEST_OVERHEAD_TOKENS
    }

    /// Tokens of one block.
    fn estimate_block(&self, block: &Block) -> u64 {
        match block {
            Block::Text { text, .. } | Block::Thinking { text, .. } => self.estimate_text(text),
            Block::ToolUse { name, input, .. } => {
                self.estimate_text(name) + self.estimate_text(&input.canonical())
            }
            Block::ToolResult { content, .. } => {
                content.iter().map(|b| self.estimate_block(b)).sum()
            }
            Block::Image { .. } => IMAGE_TOKENS,
            Block::Document { source, name, .. } => {
                let named = name.as_deref().map_or(0, |n| self.estimate_text(n));
                named
                    + match source {
                        DocumentSource::Text { text } => self.estimate_text(text),
                        // A PDF page is read as its text and an image of it (Anthropic:
                        // 1,500–3,000 tokens a page); its base64 length bounds the pages.
                        DocumentSource::Base64 { data, .. } => {
                            (data.len() as u64 / PDF_BASE64_BYTES_PER_PAGE + 1) * PDF_PAGE_TOKENS
                        }
                        DocumentSource::Url { .. } => PDF_PAGE_TOKENS,
                    }
            }
            // Opaque to us; their length bounds what they hold.
            Block::RedactedThinking { data, .. } => self.estimate_text(data) / 2,
            Block::Native { value, .. } => self.estimate_text(&value.canonical()),
        }
    }
}

/// Tokens added per message for role and framing.
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 4;
/// Tokens added per request.
pub const REQUEST_OVERHEAD_TOKENS: u64 = 8;
/// Tokens assumed for a document page (Anthropic counts 1,500–3,000 a PDF page).
pub const PDF_PAGE_TOKENS: u64 = 3_000;
/// Base64 bytes assumed per PDF page when counting pages (about 75 KB a page).
const PDF_BASE64_BYTES_PER_PAGE: u64 = 100_000;
/// Tokens assumed for an image (a large image at Anthropic is about 1,600 tokens).
pub const IMAGE_TOKENS: u64 = 1_600;

/// A tokenizer-free estimate that errs high for prose, code, numbers and non-Latin text
/// alike: each run of ASCII letters, and each run of digits, counts one token per three
/// characters (rounded up; BPE tokens average about four letters, and split digits in
/// groups of at most three), every punctuation mark one token, every non-ASCII character
/// one token per UTF-8 byte pair (CJK text runs 1–2 tokens a character), and each line
/// break one token.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultEstimator;

impl TokenEstimator for DefaultEstimator {
    // Byte by byte (a 100k-token prompt is estimated on the runtime, before it queues):
    // ASCII as it comes, and each non-ASCII character by its UTF-8 lead byte, which
    // gives its length; continuation bytes add nothing.
    fn estimate_text(&self, text: &str) -> u64 {
        let mut tokens = 0u64;
        // The current run: its length, and whether it is digits.
        let mut run = 0u64;
        let mut digits = false;
        for &b in text.as_bytes() {
            if b.is_ascii_alphanumeric() {
                let is_digit = b.is_ascii_digit();
                if run > 0 && is_digit != digits {
                    tokens += run.div_ceil(3);
                    run = 0;
                }
                digits = is_digit;
                run += 1;
                continue;
            }
            if b & 0xC0 == 0x80 {
                // A continuation byte: its character was counted at its lead byte.
                continue;
            }
            tokens += run.div_ceil(3);
            run = 0;
            if b == b'\n' || b.is_ascii_punctuation() {
                tokens += 1;
            } else if !b.is_ascii() {
                let len: u64 = match b {
                    0xF0.. => 4,
                    0xE0.. => 3,
                    _ => 2,
                };
                tokens += len.div_ceil(2);
            }
        }
        tokens + run.div_ceil(3)
    }
}

/// An upper bound on any byte-pair encoding's count, found without a tokenizer table:
/// one token per UTF-8 byte of text. A BPE (tiktoken's included) starts a piece of text
/// at one token per byte and each merge joins two tokens into one, so no text ever
/// encodes to more tokens than it has bytes. A large over-estimate of prose (about four
/// times), for the moments before a table is loaded ([`TiktokenEstimator::count_without_waiting`]);
/// images and the per-message overheads count as in every estimator.
#[derive(Debug, Clone, Copy, Default)]
pub struct ByteBoundEstimator;

impl TokenEstimator for ByteBoundEstimator {
    fn estimate_text(&self, text: &str) -> u64 {
        text.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, SamplingParams};

    /// The estimate as first written, character by character: the byte-wise one must
    /// agree with it on every text.
    fn by_chars(text: &str) -> u64 {
        let mut tokens = 0u64;
        // The current run: its length, and whether it is digits.
        let mut run = 0u64;
        let mut digits = false;
        for c in text.chars() {
            if c.is_ascii_alphanumeric() {
                let is_digit = c.is_ascii_digit();
                if run > 0 && is_digit != digits {
                    tokens += run.div_ceil(3);
                    run = 0;
                }
                digits = is_digit;
                run += 1;
                continue;
            }
            tokens += run.div_ceil(3);
            run = 0;
            if c == '\n' || c.is_ascii_punctuation() {
                tokens += 1;
            } else if !c.is_ascii() {
                tokens += (c.len_utf8() as u64).div_ceil(2);
            }
        }
        tokens + run.div_ceil(3)
    }

    proptest::proptest! {
        #[test]
        fn default_estimate_byte_wise_agrees_with_the_character_wise_one(text in "\\PC*") {
            proptest::prop_assert_eq!(DefaultEstimator.estimate_text(&text), by_chars(&text));
        }
    }

    #[test]
    fn default_estimate_byte_wise_agrees_on_every_utf8_length() {
        for text in [
            "héllo wörld",
            "日本語のテキスト",
            "emoji 🙂🙃 ok",
            "a1b22c333\n;x",
            "",
        ] {
            assert_eq!(
                DefaultEstimator.estimate_text(text),
                by_chars(text),
                "{text}"
            );
        }
    }

    #[test]
    fn default_estimate_errs_high_for_english_text() {
        let text = "The quick brown fox jumps over the lazy dog. ".repeat(20);
        // ~4 characters per token in cl100k for English prose.
        assert!(DefaultEstimator.estimate_text(&text) >= text.len() as u64 / 4);
    }

    #[test]
    fn request_estimate_counts_every_message_and_overheads() {
        let r = LlmRequest::new(
            "m",
            vec![Message::system("abc"), Message::user("abcdef")],
            vec![],
            SamplingParams::new(),
        )
        .unwrap();
        assert_eq!(
            DefaultEstimator.estimate_request(&r),
            1 + 2 + 2 * MESSAGE_OVERHEAD_TOKENS + REQUEST_OVERHEAD_TOKENS
        );
    }
}

/// Which OpenAI byte-pair encoding a [`TiktokenEstimator`] uses.
#[cfg(feature = "tiktoken")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TiktokenEncoding {
    /// `cl100k_base` (GPT-4, GPT-3.5, the text-embedding-3 models).
    Cl100k,
    /// `o200k_base` (GPT-4o, o-series and later).
    O200k,
}

/// One encoding's table, loaded once per process, and whether a warm-up started.
#[cfg(feature = "tiktoken")]
struct Table {
    bpe: std::sync::OnceLock<&'static tiktoken_rs::CoreBPE>,
    warming: std::sync::atomic::AtomicBool,
}

#[cfg(feature = "tiktoken")]
impl Table {
    const fn new() -> Self {
        Table {
            bpe: std::sync::OnceLock::new(),
            warming: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

#[cfg(feature = "tiktoken")]
static CL100K: Table = Table::new();
#[cfg(feature = "tiktoken")]
static O200K: Table = Table::new();

#[cfg(feature = "tiktoken")]
impl TiktokenEncoding {
    fn slot(self) -> &'static Table {
        match self {
            TiktokenEncoding::Cl100k => &CL100K,
            TiktokenEncoding::O200k => &O200K,
        }
    }

    /// The table, loaded here on first use; a load under way on another thread (a
    /// [`TiktokenEncoding::warm_up`]) is waited for, not repeated.
    fn table(self) -> &'static tiktoken_rs::CoreBPE {
        self.slot().bpe.get_or_init(|| match self {
            TiktokenEncoding::Cl100k => tiktoken_rs::cl100k_base_singleton(),
            TiktokenEncoding::O200k => tiktoken_rs::o200k_base_singleton(),
        })
    }

    /// Whether this process has loaded the table.
    pub fn is_loaded(self) -> bool {
        self.slot().bpe.get().is_some()
    }

    /// Whether a [`TiktokenEncoding::warm_up`] started loading the table in this process.
    pub fn warm_up_started(self) -> bool {
        self.slot()
            .warming
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Starts loading the table on a thread of its own, once per process, so that the
    /// first estimate finds it loaded (a load is about 150 ms of CPU in a release build,
    /// several times that in a debug one). Returns at once: the thread's handle when
    /// this call started it; `None` when the table is loaded or loading already, or when
    /// no thread could be started (the first estimate then loads it, as without a
    /// warm-up).
    ///
    /// An estimate made while the thread loads waits for the rest of that load, never a
    /// second one. The thread's load costs about a tenth more CPU than the caller's own
    /// would (glibc gives the thread an allocation arena of its own, and the table is
    /// some 600,000 allocations), so an estimate made right after the warm-up started
    /// can wait that much longer; one made later waits less, or not at all.
    pub fn warm_up(self) -> Option<std::thread::JoinHandle<()>> {
        use std::sync::atomic::Ordering;
        let slot = self.slot();
        if self.is_loaded() || slot.warming.swap(true, Ordering::AcqRel) {
            return None;
        }
        let spawned = std::thread::Builder::new()
            .name("tollgate-tiktoken".into())
            .spawn(move || {
                self.table();
            });
        match spawned {
            Ok(handle) => Some(handle),
            Err(_) => {
                slot.warming.store(false, Ordering::Release);
                None
            }
        }
    }
}

/// Exact token counts for OpenAI models, offline: the BPE tables are compiled into the
/// binary (feature `tiktoken`). Loading a table takes tens of milliseconds (more in a
/// debug build) once per process, on the first estimate or ahead of it with
/// [`TiktokenEstimator::warm_up`]; later estimates share it.
#[cfg(feature = "tiktoken")]
#[derive(Debug, Clone, Copy)]
pub struct TiktokenEstimator {
    encoding: TiktokenEncoding,
}

#[cfg(feature = "tiktoken")]
impl TiktokenEstimator {
    /// An estimator for `encoding`.
    pub fn new(encoding: TiktokenEncoding) -> Self {
        TiktokenEstimator { encoding }
    }

    /// The encoding an OpenAI model name uses (`gpt-4o`, `o1`, … → o200k; else cl100k).
    pub fn for_model(name: &str) -> Self {
        let o200k = [
            "gpt-4o",
            "gpt-4.1",
            "gpt-4.5",
            "gpt-5",
            "o1",
            "o3",
            "o4",
            "chatgpt-4o",
        ];
        let encoding = if o200k.iter().any(|p| name.starts_with(p)) {
            TiktokenEncoding::O200k
        } else {
            TiktokenEncoding::Cl100k
        };
        Self::new(encoding)
    }

    /// The encoding this estimator counts with.
    pub fn encoding(&self) -> TiktokenEncoding {
        self.encoding
    }

    /// Starts loading this estimator's table in the background
    /// ([`TiktokenEncoding::warm_up`]).
    pub fn warm_up(&self) -> Option<std::thread::JoinHandle<()>> {
        self.encoding.warm_up()
    }

    /// `count` made with this estimator, without waiting for its table when that can
    /// change nothing that matters: while the process has not loaded the table yet,
    /// `count` is made with [`ByteBoundEstimator`] instead (starting the table's load for
    /// the next call, if nobody has), provided that bound is at most `bound_limit`; a
    /// larger bound, or a loaded table, gives the exact count. Never below the exact
    /// count, so a reservation made on it is safe: the difference is settled back.
    ///
    /// `count` is given the estimator to count with, e.g.
    /// `|e| e.estimate_request(request)`; `bound_limit` is the largest over-estimate the
    /// caller accepts (0: always exact).
    pub fn count_without_waiting(
        &self,
        bound_limit: u64,
        count: impl Fn(&dyn TokenEstimator) -> u64,
    ) -> u64 {
        if !self.encoding.is_loaded() {
            let bound = count(&ByteBoundEstimator);
            if bound <= bound_limit {
                self.encoding.warm_up();
                return bound;
            }
        }
        count(self)
    }
}

#[cfg(feature = "tiktoken")]
impl TokenEstimator for TiktokenEstimator {
    fn estimate_text(&self, text: &str) -> u64 {
        self.encoding.table().encode_ordinary(text).len() as u64
    }
}

#[cfg(all(test, feature = "tiktoken"))]
mod tiktoken_tests {
    use super::*;

    #[test]
    fn warm_up_loads_the_table_on_its_own_thread_once() {
        let encoding = TiktokenEncoding::O200k;
        assert!(!encoding.is_loaded() && !encoding.warm_up_started());
        let thread = encoding
            .warm_up()
            .expect("the first warm-up starts a thread");
        assert!(encoding.warm_up_started());
        assert!(encoding.warm_up().is_none(), "one load per process");
        thread.join().expect("the load does not panic");
        assert!(encoding.is_loaded());
        let exact = TiktokenEstimator::new(encoding).estimate_text("Hello, world!");
        assert_eq!(exact, 4);
    }

    #[test]
    fn count_without_waiting_gives_the_byte_bound_until_the_table_is_loaded() {
        let estimator = TiktokenEstimator::new(TiktokenEncoding::O200k);
        let text = "Hello, world!";
        let count = |limit| estimator.count_without_waiting(limit, |e| e.estimate_text(text));
        assert!(!estimator.encoding().is_loaded());
        assert_eq!(count(100), 13, "one per byte, without the table");
        assert!(
            estimator.encoding().warm_up_started(),
            "the bound starts the load for the calls after it"
        );
        assert_eq!(count(12), 4, "a bound above the limit waits for the table");
        assert_eq!(count(100), 4, "once loaded, always exact");
    }

    #[test]
    fn estimate_loads_the_table_without_a_warm_up() {
        let encoding = TiktokenEncoding::Cl100k;
        assert_eq!(
            TiktokenEstimator::new(encoding).estimate_text("Hello, world!"),
            4
        );
        assert!(encoding.is_loaded() && !encoding.warm_up_started());
        assert!(encoding.warm_up().is_none(), "nothing left to load");
    }
}
