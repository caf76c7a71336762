//! Batch input: one request per line, in the OpenAI Batch API's file format or a plain
//! form.
//!
//! - Batch API: `{"custom_id": "...", "method": "POST", "url": "/v1/chat/completions",
//!   "body": {"messages": [...], "max_tokens": 100, ...}}`, or `"url": "/v1/embeddings"`
//!   with `"body": {"input": "text" | ["text", ...]}`. The body's `model` is ignored:
//!   `--model` names the catalog model. A chat body is read as `tollgate serve` reads
//!   `/v1/chat/completions` (tools, tool choice, images, response format, reasoning...):
//!   nothing it asks is dropped, and what cannot be carried is a bad line.
//! - Plain: a JSON string (one prompt), a JSON array of messages, an object with
//!   `prompt` or `messages` (and optional `custom_id`, `system`, and any chat-completions
//!   setting such as `max_tokens` or `tools`), or a line
//!   of text that is not JSON (the prompt itself). A plain line without `custom_id` gets
//!   `line-N`.
//!
//! A line that cannot be understood is a [`BadLine`] with its number and the reason; the
//! run reports it and goes on. Blank lines are skipped.

use serde_json::Value;
use tollgate::LlmRequest;

/// What a line asks for.
#[derive(Debug, Clone)]
pub(crate) enum Body {
    /// A chat completion.
    Chat(Box<LlmRequest>),
    /// Embeddings of these texts.
    Embed(Vec<String>),
}

/// One request of the batch.
#[derive(Debug, Clone)]
pub(crate) struct Item {
    pub(crate) custom_id: String,
    pub(crate) line: usize,
    pub(crate) body: Body,
    /// The line asked for a stream (`"stream": true`): a live run answers it whole; a
    /// provider's batch API cannot carry it.
    pub(crate) stream: bool,
}

/// A line that was skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadLine {
    pub(crate) line: usize,
    pub(crate) reason: String,
}

/// Parses line number `line` (from 1) of the input for catalog model `model_id`; `None`
/// for a blank line.
pub(crate) fn parse_line(line: usize, text: &str, model_id: &str) -> Result<Option<Item>, BadLine> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let bad = |reason: String| BadLine { line, reason };
    let starts_json = text.starts_with(['{', '[', '"']);
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) if starts_json => return Err(bad(format!("not valid JSON: {e}"))),
        Err(_) => Value::String(text.to_owned()),
    };
    let fallback_id = format!("line-{line}");
    let (custom_id, body) = match &value {
        Value::String(prompt) => (
            fallback_id,
            chat(model_id, &serde_json::json!({"messages": [user(prompt)]})).map_err(bad)?,
        ),
        Value::Array(messages) => (
            fallback_id,
            chat(model_id, &serde_json::json!({"messages": messages})).map_err(bad)?,
        ),
        Value::Object(obj) => {
            let custom_id = match obj.get("custom_id") {
                None => fallback_id,
                Some(Value::String(s)) if !s.is_empty() => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                Some(_) => return Err(bad("`custom_id` must be a non-empty string".into())),
            };
            let body = if let Some(url) = obj.get("url") {
                batch_api(model_id, url, obj.get("body")).map_err(bad)?
            } else if let Some(prompt) = obj.get("prompt") {
                let Value::String(prompt) = prompt else {
                    return Err(bad("`prompt` must be a string".into()));
                };
                let mut messages = Vec::new();
                if let Some(system) = obj.get("system") {
                    messages.push(serde_json::json!({"role": "system", "content": system}));
                }
                messages.push(user(prompt));
                let mut body = plain_params(obj);
                body.insert("messages".into(), Value::Array(messages));
                chat(model_id, &Value::Object(body)).map_err(bad)?
            } else if let Some(Value::Array(_)) = obj.get("messages") {
                chat(model_id, &Value::Object(plain_params(obj))).map_err(bad)?
            } else {
                return Err(bad(
                    "expected a Batch API line (`custom_id`, `method`, `url`, `body`) or a plain \
                     one (`prompt` or `messages`)"
                        .into(),
                ));
            };
            (custom_id, body)
        }
        _ => {
            return Err(bad(
                "expected a prompt, a list of messages or an object".into()
            ));
        }
    };
    let (body, stream) = body;
    Ok(Some(Item {
        custom_id,
        line,
        body,
        stream,
    }))
}

fn user(prompt: &str) -> Value {
    serde_json::json!({"role": "user", "content": prompt})
}

fn batch_api(model_id: &str, url: &Value, body: Option<&Value>) -> Result<(Body, bool), String> {
    let Some(body) = body.filter(|b| b.is_object()) else {
        return Err("`body` must be an object".into());
    };
    match url.as_str() {
        Some("/v1/chat/completions") => {
            let Some(Value::Array(_)) = body.get("messages") else {
                return Err("`body.messages` must be an array".into());
            };
            chat(model_id, body)
        }
        Some("/v1/embeddings") => match body.get("input") {
            Some(Value::String(s)) => Ok((Body::Embed(vec![s.clone()]), false)),
            Some(Value::Array(items)) if !items.is_empty() => items
                .iter()
                .map(|i| i.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .map(|texts| (Body::Embed(texts), false))
                .ok_or_else(|| "`body.input` must be a string or an array of strings".into()),
            _ => Err("`body.input` must be a string or an array of strings".into()),
        },
        Some(other) => Err(format!(
            "`url` `{other}` is not supported; use /v1/chat/completions or /v1/embeddings"
        )),
        None => Err("`url` must be a string".into()),
    }
}

/// A plain line's own fields, the request's settings (`max_tokens`, `temperature`,
/// `tools`...), without the line's `custom_id`, `prompt` and `system`.
fn plain_params(obj: &serde_json::Map<String, Value>) -> serde_json::Map<String, Value> {
    obj.iter()
        .filter(|(k, _)| !matches!(k.as_str(), "custom_id" | "prompt" | "system"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A chat body read as the gateway reads `/v1/chat/completions` (every field it carries
/// reaches the request; one it cannot carry is refused), and whether it asked to stream.
fn chat(model_id: &str, body: &Value) -> Result<(Body, bool), String> {
    tollgate_gateway::decode_openai_chat(body, model_id)
        .map(|(request, stream)| (Body::Chat(Box::new(request)), stream))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_api_chat_line_parses_with_its_custom_id_and_max_tokens() {
        let line = r#"{"custom_id":"r1","method":"POST","url":"/v1/chat/completions","body":{"model":"x","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":50}}"#;
        let item = parse_line(3, line, "demo").unwrap().unwrap();
        assert_eq!(item.custom_id, "r1");
        assert_eq!(item.line, 3);
        let Body::Chat(req) = item.body else {
            panic!("chat expected")
        };
        assert_eq!(req.sampling_params().max_output_tokens(), Some(50));
        assert_eq!(req.messages().len(), 2);
    }

    #[test]
    fn plain_lines_are_prompts_with_line_ids() {
        for text in [
            "\"Hello\"",
            "Hello",
            r#"{"prompt":"Hello"}"#,
            r#"[{"role":"user","content":"Hello"}]"#,
        ] {
            let item = parse_line(7, text, "demo").unwrap().unwrap();
            assert_eq!(item.custom_id, "line-7", "{text}");
            assert!(matches!(item.body, Body::Chat(_)));
        }
        assert!(parse_line(1, "   ", "demo").unwrap().is_none());
    }

    #[test]
    fn embeddings_line_parses_its_inputs() {
        let line = r#"{"custom_id":"e","method":"POST","url":"/v1/embeddings","body":{"input":["a","b"]}}"#;
        let item = parse_line(1, line, "demo-embed").unwrap().unwrap();
        assert!(matches!(item.body, Body::Embed(ref t) if t.len() == 2));
    }

    #[test]
    fn bad_lines_say_why_with_their_number() {
        let cases = [
            ("{not json", "not valid JSON"),
            (
                r#"{"custom_id":"x","url":"/v1/images","body":{}}"#,
                "not supported",
            ),
            (
                r#"{"custom_id":"x","url":"/v1/chat/completions","body":{"messages":[]}}"#,
                "messages",
            ),
            (r#"{"foo":1}"#, "expected a Batch API line"),
        ];
        for (text, needle) in cases {
            let err = parse_line(9, text, "demo").unwrap_err();
            assert_eq!(err.line, 9);
            assert!(err.reason.contains(needle), "{text}: {}", err.reason);
        }
    }

    #[test]
    fn batch_api_chat_line_keeps_its_tools_and_tool_choice_and_says_it_asked_to_stream() {
        let line = r#"{"custom_id":"t","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"Weather in Paris?"}],"stream":true,"tools":[{"type":"function","function":{"name":"weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],"tool_choice":"required"}}"#;
        let item = parse_line(1, line, "demo").unwrap().unwrap();
        assert!(item.stream);
        let Body::Chat(req) = item.body else {
            panic!("chat expected")
        };
        assert_eq!(req.tools_schema().len(), 1);
        assert_eq!(req.tools_schema()[0].name, "weather");
        assert!(req.sampling_params().tool_choice().is_some());
        let plain = parse_line(2, r#"{"prompt":"Hi","max_tokens":7}"#, "demo")
            .unwrap()
            .unwrap();
        assert!(!plain.stream);
        let Body::Chat(req) = plain.body else {
            panic!("chat expected")
        };
        assert_eq!(req.sampling_params().max_output_tokens(), Some(7));
    }

    #[test]
    fn run_lines_fail_on_a_refusal_a_cut_off_answer_or_a_missed_shape_unlike_the_gateway() {
        // Read as the gateway reads a body, but not answered as the gateway answers: in
        // an output file each of these is a typed failure line (docs/cli.md).
        let line = r#"{"custom_id":"x","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"Hi"}],"verbosity":"low"}}"#;
        let Body::Chat(req) = parse_line(1, line, "demo").unwrap().unwrap().body else {
            panic!("chat expected")
        };
        let p = req.sampling_params();
        assert!(!p.keeps_refusals());
        assert!(!p.keeps_truncated());
        assert!(!p.keeps_shape_misses());
        assert!(
            !p.drops_hints(),
            "a setting the provider cannot write is refused"
        );
    }
}
