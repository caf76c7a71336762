//! A `fake` model's `[models.ID.options]`, read with the kit's [`ModelOptions`] as a real
//! provider's are: an unknown key or a value of the wrong kind is an error.

use tollgate::provider::ModelOptions;
use tollgate::provider::{ModelEntry, Result};

/// The options a `fake` model takes. `base_url` is read by no fake code: it is where
/// spans and metrics say the calls go (the core's default `Provider::base_url`).
const KNOWN: &[&str] = &[
    "replies",
    "replay_dir",
    "replay_key",
    "max_batch",
    "base_url",
];

/// What a `fake` model's options script.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FakeOptions {
    /// `replies`: answers queued for the model, in order.
    pub(crate) replies: Vec<String>,
    /// `replay_dir` and `replay_key` (default empty): a replay cache and its activation key.
    pub(crate) replay: Option<(String, String)>,
    /// `max_batch`: the most texts (embeddings) or questions (decisions) one request
    /// takes; unset, any number.
    pub(crate) max_batch: usize,
}

impl FakeOptions {
    /// Reads `model.options`.
    pub(crate) fn from_model(model: &ModelEntry) -> Result<Self> {
        let options = ModelOptions::new(model, KNOWN)?;
        let any = |_: &str| true;
        let replay_dir = options.text("replay_dir", "a path string", any)?;
        let replay_key = options.text("replay_key", "a string", any)?;
        Ok(FakeOptions {
            replies: options
                .list("replies", "an array of strings", any)?
                .unwrap_or_default(),
            replay: replay_dir.map(|dir| (dir, replay_key.unwrap_or_default())),
            max_batch: options
                .whole("max_batch", 1)?
                .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_options_are_read_and_an_unknown_one_is_an_error() {
        let model = ModelEntry::new("m", "fake", "f")
            .with_option("replies", vec!["a", "b"])
            .with_option("replay_dir", "cache")
            .with_option("max_batch", 3);
        let options = FakeOptions::from_model(&model).unwrap();
        assert_eq!(options.replies, ["a", "b"]);
        assert_eq!(options.replay, Some(("cache".into(), String::new())));
        assert_eq!(options.max_batch, 3);
        let odd = ModelEntry::new("m", "fake", "f").with_option("colour", 1);
        assert!(FakeOptions::from_model(&odd).is_err());
        let zero = ModelEntry::new("m", "fake", "f").with_option("max_batch", 0);
        assert!(FakeOptions::from_model(&zero).is_err());
    }
}
