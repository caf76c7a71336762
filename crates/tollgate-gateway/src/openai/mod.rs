//! The OpenAI dialect: `POST /v1/chat/completions`, `POST /v1/embeddings` (the model
//! list, in both dialects, is `model_list`). Any catalog model answers, whatever its
//! provider: the request is decoded into tollgate's neutral types and the answer
//! encoded back.

mod decode;
mod handlers;
mod request;
mod response;

pub use decode::decode_openai_chat;
pub(crate) use handlers::{CHAT_COMPLETIONS, EMBEDDINGS, chat_completions, embeddings};
pub use response::{openai_completion, openai_embeddings};
