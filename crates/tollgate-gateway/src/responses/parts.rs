//! The content of a Responses message or tool output: text, refusal, image and file
//! parts, in tollgate's blocks. A part that names a file stored at OpenAI (`file_id`) is
//! refused: it cannot be sent to another provider.

use serde_json::Value;
use tollgate::{Block, DocumentSource, ImageSource};

use super::fields::{bad, kind_of, str_field};
use crate::error::GatewayError;

/// A message's content: a string, or a list of parts.
pub(super) fn content(content: Option<&Value>, path: &str) -> Result<Vec<Block>, GatewayError> {
    match content {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(text)) if text.is_empty() => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(vec![Block::text(text.clone())]),
        Some(Value::Array(parts)) => parts
            .iter()
            .enumerate()
            .map(|(j, p)| part(p, &format!("{path}.content[{j}]")))
            .collect(),
        Some(other) => Err(bad(format!(
            "`{path}.content` must be a string or a list of parts, not {}",
            kind_of(other)
        ))),
    }
}

fn part(part: &Value, path: &str) -> Result<Block, GatewayError> {
    match part.get("type").and_then(Value::as_str) {
        Some("input_text" | "output_text" | "text") => {
            Ok(Block::text(str_field(part, "text", path)?))
        }
        Some("refusal") => Ok(Block::text(str_field(part, "refusal", path)?)),
        Some("input_image") => match part.get("image_url").and_then(Value::as_str) {
            Some(url) => Ok(Block::Image {
                source: image_source(url, path)?,
                cache: None,
            }),
            None => Err(file_id_refused(part, path, "image_url")),
        },
        Some("input_file") => {
            let name = part
                .get("filename")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let source = if let Some(data) = part.get("file_data").and_then(Value::as_str) {
                match image_source(data, path)? {
                    ImageSource::Base64 { media_type, data } => {
                        DocumentSource::Base64 { media_type, data }
                    }
                    ImageSource::Url { .. } => DocumentSource::Base64 {
                        // Bare base64, as the openai SDK sends it without a data URL.
                        media_type: "application/pdf".into(),
                        data: data.to_owned(),
                    },
                }
            } else if let Some(url) = part.get("file_url").and_then(Value::as_str) {
                DocumentSource::Url { url: url.into() }
            } else {
                return Err(file_id_refused(part, path, "file_data` or `file_url"));
            };
            Ok(Block::Document {
                source,
                name,
                cache: None,
            })
        }
        Some(other) => Err(bad(format!(
            "`{path}.type` `{other}` is not one of input_text, output_text, refusal, \
             input_image, input_file"
        ))),
        None => Err(bad(format!("`{path}.type` is required"))),
    }
}

/// A part that names a file stored at OpenAI: it cannot go to another provider.
fn file_id_refused(part: &Value, path: &str, wanted: &str) -> GatewayError {
    let id = part
        .get("file_id")
        .and_then(Value::as_str)
        .map(|id| format!(" (`file_id` `{id}` names a file stored at OpenAI)"))
        .unwrap_or_default();
    bad(format!("`{path}` needs `{wanted}`{id}"))
}

/// A `data:<type>;base64,<data>` URL inline, any other URL by reference.
fn image_source(url: &str, path: &str) -> Result<ImageSource, GatewayError> {
    let Some(rest) = url.strip_prefix("data:") else {
        return Ok(ImageSource::Url { url: url.into() });
    };
    let (media_type, data) = rest
        .split_once(";base64,")
        .ok_or_else(|| bad(format!("`{path}`: a data URL must be base64")))?;
    Ok(ImageSource::Base64 {
        media_type: media_type.into(),
        data: data.into(),
    })
}
