//! What a check says when it ends: passed, passed in part, or skipped, with the reason a
//! part did not apply. A skip is said on the terminal, so that a provider author sees it
//! next to the test's `ok` instead of reading `ok` for a behaviour nothing checked.

use std::io::Write;

/// How a check ended (a failure panics, as in any test).
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "report it: a skip must show"]
pub enum Checked {
    /// Every part of the behaviour was checked.
    Passed,
    /// The parts that apply were checked; the rest did not apply, for this reason.
    Partly(String),
    /// Nothing was checked: the behaviour does not apply, for this reason (the script
    /// gives no wire form for it).
    Skipped(String),
}

impl Checked {
    /// Skipped, because `reason`.
    pub fn skipped(reason: impl Into<String>) -> Checked {
        Checked::Skipped(reason.into())
    }

    /// Passed, or [`Checked::Partly`] when `skipped_part` names a part that did not apply.
    pub fn passed_except(skipped_part: Option<String>) -> Checked {
        skipped_part.map_or(Checked::Passed, Checked::Partly)
    }

    /// The line a test prints for this outcome of `check`; `None` when it passed whole.
    pub fn line(&self, check: &str) -> Option<String> {
        match self {
            Checked::Passed => None,
            Checked::Partly(why) => Some(format!(
                "tollgate-testkit: `{check}` passed in part; not checked: {why}"
            )),
            Checked::Skipped(why) => Some(format!("tollgate-testkit: `{check}` SKIPPED: {why}")),
        }
    }

    /// Says a skip (whole or in part) of `check` on the process's stderr, which the test
    /// harness does not capture (it captures `eprintln!` only), so that `cargo test` shows
    /// it; says nothing for a pass.
    pub fn report(&self, check: &str) {
        if let Some(line) = self.line(check) {
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Checked;

    #[test]
    fn a_skip_and_a_partial_pass_name_the_check_and_the_reason() {
        assert_eq!(Checked::Passed.line("c"), None);
        let skipped = Checked::skipped("no refusal answer").line("a_refusal");
        assert_eq!(
            skipped.as_deref(),
            Some("tollgate-testkit: `a_refusal` SKIPPED: no refusal answer")
        );
        let partly = Checked::passed_except(Some("no stream error event".into())).line("s");
        assert!(partly.is_some_and(
            |l| l.contains("`s` passed in part") && l.contains("no stream error event")
        ));
        assert_eq!(Checked::passed_except(None), Checked::Passed);
    }
}
