//! Bedrock's modeled exceptions, by name, into a neutral [`WireError`]; the core's
//! verdict decides what each means. Both keys share it, HTTP answers and a stream's
//! exception messages alike.

use tollgate::provider::Error;
use tollgate::provider::WireError;

/// How Bedrock words a `ValidationException` for an input above the model's context
/// window: its only sign (`ValidationException` is any input Bedrock rejects).
///
/// `ValidationException` is documented as "the input fails to satisfy the constraints
/// specified by Amazon Bedrock" (400; the Converse and InvokeModel API references,
/// <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html>).
/// Its wording for a too-long input, as Bedrock sends it, for Converse and InvokeModel
/// alike: "Input is too long for requested model." (a 400 ValidationException,
/// aws-samples/assessment-generator#2; a stream's `validationException`,
/// aws-samples/bedrock-chat#95; "The model returned the following errors: Input is too
/// long for requested model." for Claude, continuedev/continue#9592). Claude's own
/// wording also comes through, after "The model returned the following errors: "
/// ("prompt is too long: 200049 tokens > 200000 maximum", daisuke-awaji/moca#254; "input
/// length and `max_tokens` exceed context limit"), read as
/// [`tollgate_anthropic::codec::OVERFLOW_WORDING`] says. AWS's own Strands Agents SDK
/// reads these as a context overflow too (strands-agents/sdk-python,
/// `src/strands/models/bedrock.py`, `BEDROCK_CONTEXT_WINDOW_OVERFLOW_MESSAGES`).
/// Matched without case, as a part of the message.
pub(crate) const OVERFLOW_WORDING: &str = "input is too long";

/// Whether a `ValidationException`'s message says the input does not fit the model's
/// context window ([`OVERFLOW_WORDING`], or Claude's own wording).
pub(crate) fn is_overflow(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains(OVERFLOW_WORDING)
        || tollgate_anthropic::codec::OVERFLOW_WORDING
            .iter()
            .any(|w| lower.contains(w))
}

/// Reads a Bedrock exception, by its modeled name (`code`), into a [`WireError`]: the
/// status it stands for and what only its name says; the core's verdict decides.
///
/// | exception | wire | error |
/// |---|---|---|
/// | ThrottlingException | 429 | `ProviderError::RateLimited` |
/// | ServiceUnavailableException, ModelNotReadyException | the wire's status (503), `overloaded` | `ProviderError::Overloaded` |
/// | InternalServerException, ModelStreamErrorException | 500 | `ProviderError::Server { 500 }` |
/// | ModelTimeoutException | 408 | `ProviderError::Timeout` |
/// | ServiceQuotaExceededException | `quota` | `Error::QuotaExhausted` |
/// | AccessDeniedException about payment or a Marketplace subscription | `quota` | `Error::QuotaExhausted` |
/// | ValidationException worded as [`OVERFLOW_WORDING`] says | 400, `context_overflow` | `Error::ContextWindowExceeded` |
/// | ValidationException, AccessDeniedException, ResourceNotFoundException, ModelErrorException | 400, 403, 404, 424 | `ProviderRequestError` |
///
/// An unknown code keeps the HTTP status when there is one, else it is a 500.
pub(crate) fn read_exception(
    code: Option<&str>,
    message: Option<&str>,
    status: Option<u16>,
) -> WireError {
    let code = code.unwrap_or("");
    let message = message.unwrap_or("");
    let payment =
        message.contains("INVALID_PAYMENT_INSTRUMENT") || message.contains("AWS Marketplace");
    let (status, overloaded, quota) = match code {
        "ThrottlingException" => (429, false, false),
        "ServiceUnavailableException" | "ModelNotReadyException" => {
            (status.unwrap_or(503), true, false)
        }
        "InternalServerException" | "ModelStreamErrorException" => (500, false, false),
        "ModelTimeoutException" => (408, false, false),
        "ServiceQuotaExceededException" => (status.unwrap_or(400), false, true),
        "AccessDeniedException" => (403, false, payment),
        "ValidationException" => (400, false, false),
        "ResourceNotFoundException" => (404, false, false),
        "ModelErrorException" => (424, false, false),
        _ => (status.unwrap_or(500), false, false),
    };
    WireError {
        status,
        kind: code.to_owned(),
        message: message.to_owned(),
        overloaded,
        quota,
        context_overflow: code == "ValidationException" && is_overflow(message),
        ..WireError::default()
    }
}

/// The error a Bedrock exception means: [`read_exception`] and the core's verdict.
pub(crate) fn classify(code: Option<&str>, message: Option<&str>, status: Option<u16>) -> Error {
    read_exception(code, message, status).verdict()
}

#[cfg(test)]
mod tests {
    use tollgate::provider::Error;

    use super::*;

    fn overflow(message: &str) -> bool {
        read_exception(Some("ValidationException"), Some(message), Some(400)).context_overflow
    }

    #[test]
    fn input_too_long_for_the_model_is_a_context_overflow() {
        assert!(overflow("Input is too long for requested model."));
        assert!(matches!(
            classify(
                Some("ValidationException"),
                Some("Input is too long for requested model."),
                Some(400)
            ),
            Error::ContextWindowExceeded { .. }
        ));
    }

    #[test]
    fn claudes_own_overflow_wording_through_bedrock_is_a_context_overflow() {
        assert!(overflow(
            "The model returned the following errors: prompt is too long: 200049 tokens > \
             200000 maximum"
        ));
        assert!(overflow(
            "The model returned the following errors: input length and `max_tokens` exceed \
             context limit: 199759 + 8192 > 200000, decrease input length or `max_tokens` and \
             try again"
        ));
        assert!(overflow(
            "The model returned the following errors: Input is too long for requested model."
        ));
    }

    #[test]
    fn a_stream_validation_exception_about_length_is_a_context_overflow() {
        // A stream's exception message has no HTTP status.
        let wire = read_exception(
            Some("ValidationException"),
            Some("Input is too long for requested model."),
            None,
        );
        assert_eq!(wire.status, 400);
        assert!(wire.context_overflow, "{wire:?}");
    }

    #[test]
    fn another_validation_exception_is_not_an_overflow() {
        assert!(!overflow(
            "Malformed input request: #: extraneous key [top_n] is not permitted, please \
             reformat your input and try again."
        ));
        assert!(matches!(
            classify(
                Some("ValidationException"),
                Some("The provided model identifier is invalid."),
                Some(400)
            ),
            Error::ProviderRequest(_)
        ));
    }

    #[test]
    fn the_wording_in_another_exception_is_not_an_overflow() {
        let wire = read_exception(
            Some("ModelErrorException"),
            Some("Input is too long for requested model."),
            Some(424),
        );
        assert!(!wire.context_overflow, "{wire:?}");
    }
}
