//! What a check says when it ends: passed, passed in part, or skipped, with the reason a
//! part did not apply; and what a test holds it to. A provider crate declares what its
//! script cannot show ([`provider_contract_tests!`](crate::provider_contract_tests)'s
//! `skip { … }` and `partly { … }`), so that a skip is an ignored test, which
//! `cargo test` and nextest count as skipped, never an `ok`: an undeclared skip, or a
//! declaration the check no longer bears out, fails the test and says what to change.

/// How a check ended (a failure panics, as in any test).
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "hold it to the declaration: `expect_passed`, `expect_partly` or `expect_skipped`"]
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

    /// What is wrong when `check`, declared as `declared`, ended as `self`: `None` when
    /// they agree, else the message telling the provider author what to change.
    pub fn against(&self, check: &str, declared: Declared) -> Option<String> {
        let call = "its `provider_contract_tests!` call";
        match (declared, self) {
            (Declared::Whole, Checked::Passed)
            | (Declared::Partly, Checked::Partly(_))
            | (Declared::Skipped, Checked::Skipped(_)) => None,
            (Declared::Whole, Checked::Skipped(why)) => Some(format!(
                "`{check}` was skipped ({why}), and the crate does not say so: add `{check}: \"why\"` to `skip {{ … }}` in {call}, so that it shows as a skipped test instead of passing"
            )),
            (Declared::Whole, Checked::Partly(why)) => Some(format!(
                "`{check}` passed only in part (not checked: {why}), and the crate does not say so: add `{check}: \"what is not checked\"` to `partly {{ … }}` in {call}"
            )),
            (Declared::Skipped, Checked::Passed) => Some(format!(
                "`{check}` is declared in `skip {{ … }}` but ran whole: remove it from {call}"
            )),
            (Declared::Skipped, Checked::Partly(why)) => Some(format!(
                "`{check}` is declared in `skip {{ … }}` but ran in part (not checked: {why}): move it to `partly {{ … }}` in {call}"
            )),
            (Declared::Partly, Checked::Passed) => Some(format!(
                "`{check}` is declared in `partly {{ … }}` but ran whole: remove it from {call}"
            )),
            (Declared::Partly, Checked::Skipped(why)) => Some(format!(
                "`{check}` is declared in `partly {{ … }}` but was skipped ({why}): move it to `skip {{ … }}` in {call}"
            )),
        }
    }

    /// Panics unless `check` ended as `declared`, with [`Checked::against`]'s message.
    #[track_caller]
    pub fn expect(&self, check: &str, declared: Declared) {
        if let Some(wrong) = self.against(check, declared) {
            panic!("tollgate-testkit: {wrong}");
        }
    }
}

/// What a provider crate declares a check comes to for its script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declared {
    /// Checked whole (nothing declared).
    Whole,
    /// In `partly { … }`: some part does not apply.
    Partly,
    /// In `skip { … }`: nothing applies.
    Skipped,
}

#[cfg(test)]
mod tests {
    use super::{Checked, Declared};

    #[test]
    fn an_outcome_that_matches_its_declaration_is_fine() {
        assert_eq!(Checked::Passed.against("c", Declared::Whole), None);
        assert_eq!(Checked::skipped("x").against("c", Declared::Skipped), None);
        let partly = Checked::passed_except(Some("no stream error event".into()));
        assert_eq!(partly.against("c", Declared::Partly), None);
        assert_eq!(Checked::passed_except(None), Checked::Passed);
    }

    #[test]
    fn an_undeclared_skip_or_partial_pass_says_which_list_to_add_it_to() {
        let skipped = Checked::skipped("no refusal answer").against("a_refusal", Declared::Whole);
        let skipped = skipped.expect("an undeclared skip is wrong");
        assert!(
            skipped.contains("`a_refusal` was skipped (no refusal answer)"),
            "{skipped}"
        );
        assert!(
            skipped.contains("add `a_refusal: \"why\"` to `skip { … }`"),
            "{skipped}"
        );
        let partly = Checked::Partly("no window stop".into()).against("o", Declared::Whole);
        assert!(
            partly.is_some_and(|m| m.contains("to `partly { … }`") && m.contains("no window stop"))
        );
    }

    #[test]
    fn a_declaration_the_check_no_longer_bears_out_says_what_to_change() {
        let ran = Checked::Passed.against("t", Declared::Skipped).unwrap();
        assert!(
            ran.contains("declared in `skip { … }` but ran whole: remove it"),
            "{ran}"
        );
        let part = Checked::Partly("x".into())
            .against("t", Declared::Skipped)
            .unwrap();
        assert!(part.contains("move it to `partly { … }`"), "{part}");
        let whole = Checked::Passed.against("t", Declared::Partly).unwrap();
        assert!(
            whole.contains("declared in `partly { … }` but ran whole"),
            "{whole}"
        );
        let none = Checked::skipped("y")
            .against("t", Declared::Partly)
            .unwrap();
        assert!(none.contains("move it to `skip { … }`"), "{none}");
    }

    #[test]
    #[should_panic(expected = "and the crate does not say so")]
    fn expect_panics_on_an_undeclared_skip() {
        Checked::skipped("no tools").expect("a_tool_call", Declared::Whole);
    }
}
