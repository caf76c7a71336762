//! The state of a `--via batch` run, kept beside its output (`<output>.batches.json`):
//! each batch the run made, with its label, its requests' ids, its share of the queue
//! limit and, once the provider answered the submission, its handle. A re-run reads it
//! to pick up the submitted batches (never submitting their requests twice), and removes
//! a batch from it once its lines are written; the file goes when no batch is left.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tollgate::provider::batch::{BatchCounts, BatchHandle, BatchPhase};

/// One batch of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Slot {
    /// The run's name for it: its queue hold's lease, and the label the provider keeps
    /// (metadata, display name) so that a batch whose submission was never recorded can
    /// be found.
    pub(crate) label: String,
    /// The `custom_id`s of its requests.
    pub(crate) ids: Vec<String>,
    /// Its estimated input tokens: what it holds of the enqueued-token limit.
    pub(crate) tokens: u64,
    /// The provider's handle; `None` between the hold and the provider's answer to the
    /// submission (a run that stopped there looks for it by label).
    pub(crate) handle: Option<BatchHandle>,
    /// Where it was at the last poll.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) phase: Option<BatchPhase>,
    /// Its counts at the last poll.
    #[serde(default)]
    pub(crate) counts: BatchCounts,
    /// `--cancel` asked the provider to cancel it.
    #[serde(default)]
    pub(crate) cancel_sent: bool,
}

/// The run's batches.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct State {
    /// The catalog model the batches were made for.
    pub(crate) model: String,
    /// The batches not yet collected.
    pub(crate) batches: Vec<Slot>,
}

/// Where the state of a run writing `output` is kept.
pub(crate) fn path_for(output: &Path) -> PathBuf {
    let mut name = output.as_os_str().to_owned();
    name.push(".batches.json");
    PathBuf::from(name)
}

impl State {
    /// The state at `path`, or an empty one for `model` if there is none.
    pub(crate) fn load(path: &Path, model: &str) -> Result<State, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let state: State = serde_json::from_str(&text).map_err(|e| {
                    format!(
                        "`{}` (the batches of an earlier run) cannot be read: {e}; if no batch \
                         of it is still running, delete it",
                        path.display()
                    )
                })?;
                if !state.batches.is_empty() && state.model != model {
                    return Err(format!(
                        "`{}` holds batches of model `{}`, not `{model}`: re-run with \
                         `--model {}` to collect them (or `--cancel` them)",
                        path.display(),
                        state.model,
                        state.model
                    ));
                }
                Ok(State {
                    model: model.to_owned(),
                    ..state
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State {
                model: model.to_owned(),
                batches: Vec::new(),
            }),
            Err(e) => Err(format!("cannot read `{}`: {e}", path.display())),
        }
    }

    /// The ids of every request in the state's batches.
    pub(crate) fn held_ids(&self) -> std::collections::HashSet<String> {
        self.batches
            .iter()
            .flat_map(|s| s.ids.iter().cloned())
            .collect()
    }

    /// Writes the state to `path` (whole, through a temporary file renamed over it, so a
    /// crash leaves the old state or the new), or removes the file when no batch is left.
    pub(crate) fn save(&self, path: &Path) -> Result<(), String> {
        if self.batches.is_empty() {
            return match std::fs::remove_file(path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(format!("cannot remove `{}`: {e}", path.display())),
            };
        }
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| format!("cannot write `{}`: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(label: &str) -> Slot {
        Slot {
            label: label.into(),
            ids: vec!["a".into(), "b".into()],
            tokens: 12,
            handle: Some(BatchHandle {
                id: "batch_1".into(),
                input_file: Some("file-1".into()),
            }),
            phase: Some(BatchPhase::Running),
            counts: BatchCounts::default(),
            cancel_sent: false,
        }
    }

    #[test]
    fn batch_state_round_trips_and_its_file_goes_when_no_batch_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_for(&dir.path().join("out.jsonl"));
        assert!(path.ends_with("out.jsonl.batches.json"));
        let mut state = State::load(&path, "m").unwrap();
        assert!(state.batches.is_empty());
        state.batches.push(slot("l1"));
        state.save(&path).unwrap();
        assert_eq!(State::load(&path, "m").unwrap(), state);
        state.batches.clear();
        state.save(&path).unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn batch_state_of_another_model_is_refused_with_the_model_to_use() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_for(&dir.path().join("out.jsonl"));
        let state = State {
            model: "gpt".into(),
            batches: vec![slot("l1")],
        };
        state.save(&path).unwrap();
        let err = State::load(&path, "claude").unwrap_err();
        assert!(err.contains("--model gpt"), "{err}");
    }
}
