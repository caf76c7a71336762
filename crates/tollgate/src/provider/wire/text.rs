//! Reading blocks that a provider's wire format can only carry as text (a system
//! message, a tool result), with one wording for the error when they are not.

use crate::conversation::Block;
use crate::error::{Error, Result};

/// The text of `blocks`, joined. Any other block is [`Error::InvalidRequest`] naming
/// `field[k]` and saying that `holder` (e.g. "OpenAI's system message") holds text
/// only, so the caller knows what to change before anything is sent.
///
/// ```
/// use tollgate::Block;
/// use tollgate::wire::text_only;
///
/// assert_eq!(text_only(&[Block::text("a"), Block::text("b")], "system", "the system")?, "ab");
/// # Ok::<(), tollgate::Error>(())
/// ```
pub fn text_only(blocks: &[Block], field: &str, holder: &str) -> Result<String> {
    let mut out = String::new();
    for (k, block) in blocks.iter().enumerate() {
        match block {
            Block::Text { text, .. } => out.push_str(text),
            _ => {
                return Err(Error::invalid_request(
                    format!("{field}[{k}]"),
                    format!("must be text: {holder} holds text only"),
                ));
            }
        }
    }
    Ok(out)
}
