//! The OpenAI Responses API: `POST /v1/responses`, whole or streamed, for any catalog
//! model (decoded into tollgate's neutral request, the answer encoded back). The gateway
//! keeps no state, so the routes that read stored responses answer 404 in OpenAI's error
//! shape, and a request that names stored state is refused with the field it used.

mod envelope;
mod fields;
mod handlers;
mod output;
mod parts;
mod request;
mod stream;
mod tools;

pub(crate) use handlers::{RESPONSES, STORED_RESPONSE, responses, stored_response};
