//! The content blocks of a streamed answer, assembled from their deltas: one assembler
//! for every codec, so that each says only which wire event starts or continues which
//! block.

use std::fmt::Debug;

use serde_json::Value;

use crate::conversation::Block;
use crate::error::{Error, Result};
use crate::json::Json;
use crate::stream::StreamEvent;

use super::malformed::undecodable;

/// A block being streamed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Building {
    Text(String),
    Thinking {
        text: String,
        signature: Option<String>,
    },
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    /// A block that arrived whole (redacted thinking, a provider's own block).
    Whole(Block),
    /// A provider's own block whose `input` streams as JSON text, as a tool use's does
    /// (Anthropic's `server_tool_use`): the block as it started, and the input so far.
    NativeInput {
        provider: String,
        value: Value,
        json: String,
    },
    /// A block kind tollgate has no neutral form for: left out of the answer, its
    /// deltas ignored.
    Skipped,
}

/// The blocks of one streamed answer, each named by a key of the codec's choosing (the
/// wire's block index, a tool call's index, …), in order of first appearance.
///
/// Each method that adds content returns the [`StreamEvent`] to hand on (none for an
/// empty delta); its `index` is the block's place in that order, which is also its
/// place in the answer [`finish`](Self::finish) makes. A delta of another kind than its
/// block is malformed; deltas of a [skipped](Self::skip) block are ignored. A block that
/// arrives whole is added by [`whole`](Self::whole); a provider's own block whose input
/// streams, by [`native_input`](Self::native_input), handed on whole once
/// [`complete`](Self::complete).
///
/// ```
/// use tollgate::wire::BlockAssembler;
/// use tollgate::{Block, StreamEvent};
///
/// let mut blocks = BlockAssembler::new();
/// blocks.text(0, "Hel")?;
/// blocks.tool_use(1, "call_1", "lookup", "{\"q\":")?;
/// blocks.text(0, "lo")?;
/// let delta = blocks.tool_input(1, "1}")?;
/// assert!(matches!(delta, Some(StreamEvent::ToolUseDelta { index: 1, .. })));
/// let content = blocks.finish()?;
/// assert_eq!(content[0], Block::text("Hello"));
/// assert!(matches!(&content[1], Block::ToolUse { input, .. } if input.value()["q"] == 1));
/// # Ok::<(), tollgate::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct BlockAssembler<K = usize> {
    blocks: Vec<(K, Building)>,
}

impl<K> Default for BlockAssembler<K> {
    fn default() -> Self {
        BlockAssembler { blocks: Vec::new() }
    }
}

impl<K: PartialEq + Debug> BlockAssembler<K> {
    /// No blocks yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// [`BlockAssembler::finish`], with each signed thinking block marked as signed by
    /// `provider` (its [`Block::Thinking`] `origin`), so it goes back only there.
    pub fn finish_signed_by(&mut self, provider: &str) -> Result<Vec<Block>> {
        let mut content = self.finish()?;
        for block in &mut content {
            if let Block::Thinking {
                signature: Some(_),
                origin,
                ..
            } = block
            {
                *origin = Some(provider.to_owned());
            }
        }
        Ok(content)
    }

    fn find(&self, key: &K) -> Option<usize> {
        self.blocks.iter().position(|(k, _)| k == key)
    }

    /// Whether block `key` has started.
    pub fn contains(&self, key: &K) -> bool {
        self.find(key).is_some()
    }

    /// The place of block `key`, started as `start` makes it if it is new.
    fn slot(&mut self, key: K, start: impl FnOnce() -> Building) -> usize {
        match self.find(&key) {
            Some(index) => index,
            None => {
                self.blocks.push((key, start()));
                self.blocks.len() - 1
            }
        }
    }

    fn mismatch(&self, index: usize, what: &str) -> Error {
        let (key, _) = &self.blocks[index];
        undecodable(format!(
            "{what} for block {key:?}, which is another kind of block"
        ))
    }

    /// Adds `text` to text block `key` (started if new, even with no text).
    pub fn text(&mut self, key: K, text: &str) -> Result<Option<StreamEvent>> {
        let index = self.slot(key, || Building::Text(String::new()));
        match &mut self.blocks[index].1 {
            Building::Text(all) => all.push_str(text),
            Building::Skipped => return Ok(None),
            _ => return Err(self.mismatch(index, "a text delta")),
        }
        Ok((!text.is_empty()).then(|| StreamEvent::TextDelta {
            index,
            text: text.to_owned(),
        }))
    }

    /// Adds `text` to thinking block `key` (started if new, even with no text).
    pub fn thinking(&mut self, key: K, text: &str) -> Result<Option<StreamEvent>> {
        let index = self.slot(key, || Building::Thinking {
            text: String::new(),
            signature: None,
        });
        match &mut self.blocks[index].1 {
            Building::Thinking { text: all, .. } => all.push_str(text),
            Building::Skipped => return Ok(None),
            _ => return Err(self.mismatch(index, "a thinking delta")),
        }
        Ok((!text.is_empty()).then(|| StreamEvent::ThinkingDelta {
            index,
            text: text.to_owned(),
        }))
    }

    /// Adds `signature` to the signature of thinking block `key` (started if new); the
    /// [`StreamEvent::SignatureDelta`] that passes it on (none for an empty part or a
    /// skipped block).
    pub fn signature(&mut self, key: K, signature: &str) -> Result<Option<StreamEvent>> {
        let index = self.slot(key, || Building::Thinking {
            text: String::new(),
            signature: None,
        });
        match &mut self.blocks[index].1 {
            Building::Thinking { signature: all, .. } => {
                all.get_or_insert_with(String::new).push_str(signature);
            }
            Building::Skipped => return Ok(None),
            _ => return Err(self.mismatch(index, "a signature")),
        }
        Ok(
            (!signature.is_empty()).then(|| StreamEvent::SignatureDelta {
                index,
                signature: signature.to_owned(),
            }),
        )
    }

    /// Starts tool-use block `key` with the tool's `id` and `name` and the first part of
    /// its input JSON (often empty). Starting a block twice is malformed.
    pub fn tool_use(
        &mut self,
        key: K,
        id: &str,
        name: &str,
        input_json: &str,
    ) -> Result<StreamEvent> {
        if let Some(index) = self.find(&key) {
            return Err(self.mismatch(index, "a second tool-use start"));
        }
        self.blocks.push((
            key,
            Building::ToolUse {
                id: id.to_owned(),
                name: name.to_owned(),
                json: input_json.to_owned(),
            },
        ));
        Ok(StreamEvent::ToolUseDelta {
            index: self.blocks.len() - 1,
            id: Some(id.to_owned()),
            name: Some(name.to_owned()),
            input_json: input_json.to_owned(),
        })
    }

    /// Adds `json` to the input of tool-use block `key`, which must have started.
    pub fn tool_input(&mut self, key: K, json: &str) -> Result<Option<StreamEvent>> {
        let Some(index) = self.find(&key) else {
            return Err(undecodable(format!(
                "tool input for block {key:?}, which was not started"
            )));
        };
        match &mut self.blocks[index].1 {
            Building::ToolUse { json: all, .. } => all.push_str(json),
            // Handed on whole when complete, not in parts.
            Building::NativeInput { json: all, .. } => {
                all.push_str(json);
                return Ok(None);
            }
            Building::Skipped => return Ok(None),
            _ => return Err(self.mismatch(index, "tool input")),
        }
        Ok((!json.is_empty()).then(|| StreamEvent::ToolUseDelta {
            index,
            id: None,
            name: None,
            input_json: json.to_owned(),
        }))
    }

    /// Adds block `key`, which arrived whole (redacted thinking, a provider's own block);
    /// the [`StreamEvent::WholeBlock`] that hands it on. Adding a block twice is
    /// malformed.
    pub fn whole(&mut self, key: K, block: Block) -> Result<StreamEvent> {
        if let Some(index) = self.find(&key) {
            return Err(self.mismatch(index, "a whole block"));
        }
        self.blocks.push((key, Building::Whole(block.clone())));
        Ok(StreamEvent::WholeBlock {
            index: self.blocks.len() - 1,
            block,
        })
    }

    /// Starts block `key` as `provider`'s own block `value` (a [`Block::Native`]) whose
    /// `input` field streams as [`tool_input`](Self::tool_input) deltas; nothing is handed
    /// on until it is [`complete`](Self::complete). Starting a block twice is malformed.
    pub fn native_input(&mut self, key: K, provider: &str, value: Value) -> Result<()> {
        if let Some(index) = self.find(&key) {
            return Err(self.mismatch(index, "a second native block start"));
        }
        self.blocks.push((
            key,
            Building::NativeInput {
                provider: provider.to_owned(),
                value,
                json: String::new(),
            },
        ));
        Ok(())
    }

    /// Block `key` is complete: as [`close`](Self::close), and a
    /// [native block with streamed input](Self::native_input) is made whole (its input
    /// parsed into `input`) and handed on as a [`StreamEvent::WholeBlock`].
    pub fn complete(&mut self, key: &K) -> Result<Option<StreamEvent>> {
        self.close(key)?;
        let Some(index) = self.find(key) else {
            return Ok(None);
        };
        let Building::NativeInput {
            provider,
            value,
            json,
        } = &self.blocks[index].1
        else {
            return Ok(None);
        };
        let block = native_block(provider.clone(), value.clone(), json)?;
        self.blocks[index].1 = Building::Whole(block.clone());
        Ok(Some(StreamEvent::WholeBlock { index, block }))
    }

    /// Starts block `key` as one left out of the answer (a kind tollgate has no neutral
    /// form for); its place is kept, so later blocks keep theirs.
    pub fn skip(&mut self, key: K) {
        self.slot(key, || Building::Skipped);
    }

    /// Block `key` is complete: a tool use's input must be JSON by now.
    pub fn close(&self, key: &K) -> Result<()> {
        match self.find(key).map(|i| &self.blocks[i].1) {
            Some(Building::ToolUse { id, json, .. }) => parse_input(id, json).map(drop),
            _ => Ok(()),
        }
    }

    /// The text of the text blocks so far, joined (e.g. for a refusal's explanation).
    pub fn text_so_far(&self) -> String {
        self.blocks
            .iter()
            .filter_map(|(_, b)| match b {
                Building::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The answer's blocks, in order, leaving the assembler empty. A tool use's input is
    /// parsed here (no input is `{}`); input that is not JSON is malformed.
    pub fn finish(&mut self) -> Result<Vec<Block>> {
        let mut content = Vec::with_capacity(self.blocks.len());
        for (_, building) in std::mem::take(&mut self.blocks) {
            content.push(match building {
                Building::Text(text) => Block::text(text),
                Building::Thinking { text, signature } => Block::Thinking {
                    text,
                    origin: None,
                    signature,
                    cache: None,
                },
                Building::ToolUse { id, name, json } => Block::ToolUse {
                    input: parse_input(&id, &json)?,
                    id,
                    name,
                    cache: None,
                },
                Building::Whole(block) => block,
                Building::NativeInput {
                    provider,
                    value,
                    json,
                } => native_block(provider, value, &json)?,
                Building::Skipped => continue,
            });
        }
        Ok(content)
    }
}

/// A native block with its streamed input in `input` (kept as it started when none came).
fn native_block(provider: String, mut value: Value, json: &str) -> Result<Block> {
    if !json.trim().is_empty() {
        let id = value.get("id").and_then(Value::as_str).unwrap_or_default();
        let input = parse_input(id, json)?;
        if let Value::Object(map) = &mut value {
            map.insert("input".into(), input.value().clone());
        }
    }
    Ok(Block::Native {
        provider,
        value: Json::new(value),
    })
}

/// A tool use's input: `{}` when none came, else its JSON.
fn parse_input(id: &str, json: &str) -> Result<Json> {
    if json.trim().is_empty() {
        return Ok(Json::new(Value::Object(serde_json::Map::new())));
    }
    serde_json::from_str(json)
        .map(Json::new)
        .map_err(|e| undecodable(format!("the input of tool use `{id}` is not JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, ProviderError};

    fn malformed(result: Result<impl Debug>) -> bool {
        matches!(
            result,
            Err(Error::Provider(ProviderError::Malformed { .. }))
        )
    }

    #[test]
    fn blocks_keep_their_order_of_first_appearance_whatever_their_keys() {
        let mut blocks = BlockAssembler::new();
        blocks.thinking(7, "hmm").unwrap();
        let signed = blocks.signature(7, "sig").unwrap();
        assert!(matches!(
            signed,
            Some(StreamEvent::SignatureDelta { index: 0, ref signature }) if signature == "sig"
        ));
        blocks.skip(3);
        let delta = blocks.text(5, "answer").unwrap();
        assert!(matches!(
            delta,
            Some(StreamEvent::TextDelta { index: 2, .. })
        ));
        let content = blocks.finish().unwrap();
        assert_eq!(
            content,
            vec![
                Block::Thinking {
                    text: "hmm".into(),
                    signature: Some("sig".into()),
                    origin: None,
                    cache: None
                },
                Block::text("answer"),
            ]
        );
        assert!(blocks.finish().unwrap().is_empty(), "finish empties it");
    }

    #[test]
    fn an_empty_delta_starts_its_block_and_emits_nothing() {
        let mut blocks = BlockAssembler::new();
        assert_eq!(blocks.text(0, "").unwrap(), None);
        assert!(blocks.contains(&0));
        assert_eq!(blocks.finish().unwrap(), vec![Block::text("")]);
    }

    #[test]
    fn a_delta_of_another_kind_than_its_block_is_malformed() {
        let mut blocks = BlockAssembler::new();
        blocks.tool_use(0, "t", "f", "").unwrap();
        assert!(malformed(blocks.text(0, "x")));
        assert!(malformed(blocks.tool_use(0, "t", "f", "")));
        assert!(malformed(blocks.tool_input(1, "{}")));
    }

    #[test]
    fn deltas_of_a_skipped_block_are_ignored() {
        let mut blocks = BlockAssembler::new();
        blocks.skip("server_tool");
        assert_eq!(blocks.tool_input("server_tool", "{}").unwrap(), None);
        assert_eq!(blocks.text("server_tool", "x").unwrap(), None);
        assert!(blocks.finish().unwrap().is_empty());
    }

    #[test]
    fn tool_input_that_is_not_json_is_malformed_at_close_and_at_finish() {
        let mut blocks = BlockAssembler::new();
        blocks.tool_use(0, "t", "f", "{\"a\":").unwrap();
        assert!(malformed(blocks.close(&0)));
        assert!(malformed(blocks.finish()));
        let mut empty = BlockAssembler::new();
        empty.tool_use(0, "t", "f", " ").unwrap();
        let content = empty.finish().unwrap();
        assert!(
            matches!(&content[0], Block::ToolUse { input, .. } if input.value() == &serde_json::json!({}))
        );
    }

    #[test]
    fn text_so_far_joins_the_text_blocks_only() {
        let mut blocks = BlockAssembler::new();
        blocks.text(0, "a").unwrap();
        blocks.thinking(1, "not this").unwrap();
        blocks.text(2, "b").unwrap();
        assert_eq!(blocks.text_so_far(), "ab");
    }

    #[test]
    fn a_whole_block_is_handed_on_and_kept_at_its_place() {
        let mut blocks = BlockAssembler::new();
        blocks.text(0, "a").unwrap();
        let redacted = Block::RedactedThinking {
            data: "opaque".into(),
            origin: Some("anthropic".into()),
        };
        let event = blocks.whole(1, redacted.clone()).unwrap();
        assert!(matches!(
            &event,
            StreamEvent::WholeBlock { index: 1, block } if *block == redacted
        ));
        assert!(malformed(blocks.whole(1, redacted.clone())));
        blocks.text(2, "b").unwrap();
        let content = blocks.finish_signed_by("bedrock").unwrap();
        assert_eq!(content, vec![Block::text("a"), redacted, Block::text("b")]);
    }

    #[test]
    fn a_native_block_with_streamed_input_is_handed_on_whole_when_complete() {
        let mut blocks = BlockAssembler::new();
        let start = serde_json::json!({"type": "server_tool_use", "id": "srv_1",
                                       "name": "web_search", "input": {}});
        blocks.native_input(0, "anthropic", start).unwrap();
        assert_eq!(blocks.tool_input(0, "{\"query\":").unwrap(), None);
        assert_eq!(blocks.tool_input(0, "\"rust\"}").unwrap(), None);
        let event = blocks.complete(&0).unwrap();
        let Some(StreamEvent::WholeBlock { index: 0, block }) = event else {
            panic!("no whole block: {event:?}");
        };
        let expected = Block::Native {
            provider: "anthropic".into(),
            value: Json::new(serde_json::json!({"type": "server_tool_use", "id": "srv_1",
                                                "name": "web_search",
                                                "input": {"query": "rust"}})),
        };
        assert_eq!(block, expected);
        assert_eq!(blocks.complete(&0).unwrap(), None, "handed on once");
        assert_eq!(blocks.finish().unwrap(), vec![expected]);
    }

    #[test]
    fn a_native_block_whose_input_is_not_json_is_malformed() {
        let mut blocks = BlockAssembler::new();
        let start = serde_json::json!({"type": "server_tool_use", "id": "srv_1", "input": {}});
        blocks.native_input(0, "anthropic", start.clone()).unwrap();
        assert!(malformed(blocks.native_input(0, "anthropic", start)));
        blocks.tool_input(0, "{\"q\":").unwrap();
        assert!(malformed(blocks.complete(&0)));
        assert!(malformed(blocks.finish()));
    }
}
