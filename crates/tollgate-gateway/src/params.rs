//! The sampling every dialect starts from: the client takes its answers as the provider
//! gives them (a cut-off answer after one send, a refusal as a 200 answer, a shape miss
//! passed on unchanged: it reads each itself, as it would from the provider; a hint such
//! as `verbosity` left out where the provider has no field for it), with the client's
//! temperature, top_p and output limit checked.

use tollgate::{SamplingParams, Verbosity};

use crate::error::GatewayError;

/// The sampling of a client request with `temperature`, `top_p` and output limit `max`,
/// answered as a gateway answers ([`gateway_answers`]).
pub(crate) fn client_params(
    temperature: Option<f64>,
    top_p: Option<f64>,
    max: Option<u64>,
) -> Result<SamplingParams, GatewayError> {
    sampling(
        gateway_answers(SamplingParams::new()),
        temperature,
        top_p,
        max,
    )
}

/// How the gateway answers: a cut-off answer, a refusal and an answer that misses its
/// shape reach the client as answers (its client reads `finish_reason`), and a hint the
/// provider has no field for is left out. A decoder used elsewhere (`tollgate run`'s
/// lines) leaves these out: there, each is a typed failure.
pub(crate) fn gateway_answers(params: SamplingParams) -> SamplingParams {
    params
        .with_truncated_answers()
        .with_refusals_as_answers()
        .with_shape_misses()
        .with_droppable_hints()
}

/// `params` with the client's `temperature`, `top_p` and output limit `max`, checked.
pub(crate) fn sampling(
    params: SamplingParams,
    temperature: Option<f64>,
    top_p: Option<f64>,
    max: Option<u64>,
) -> Result<SamplingParams, GatewayError> {
    let mut params = params;
    if let Some(t) = temperature {
        params = params.with_temperature(t)?;
    }
    if let Some(p) = top_p {
        params = params.with_top_p(p)?;
    }
    if let Some(max) = max {
        params = params.with_max_output_tokens(max)?;
    }
    Ok(params)
}

/// Parses a client's `verbosity` (`field`: where it was, for the message).
pub(crate) fn verbosity(value: &str, field: &str) -> Result<Verbosity, GatewayError> {
    Verbosity::parse(value).ok_or_else(|| {
        GatewayError::BadBody(format!(
            "`{field}` `{value}` is not one of {}",
            Verbosity::ACCEPTED
        ))
    })
}
