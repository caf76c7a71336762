//! The steps of `test-all` timed: each step's closing line (`==> NAME ok in 12.3s`) as it
//! ends, and at the end a table of every step, what it came to and how long it took, with
//! the total.

use std::time::Instant;

/// What a step came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Passed,
    /// Not run, saying why (e.g. a tool that could not be had outside CI).
    Skipped,
    Failed,
}

impl Outcome {
    pub(crate) fn from_ok(ok: bool) -> Self {
        if ok { Outcome::Passed } else { Outcome::Failed }
    }

    fn word(self) -> &'static str {
        match self {
            Outcome::Passed => "ok",
            Outcome::Skipped => "SKIPPED",
            Outcome::Failed => "FAILED",
        }
    }
}

/// Every step run so far: name, outcome, seconds.
#[derive(Debug, Default)]
pub(crate) struct Summary {
    steps: Vec<(String, Outcome, f64)>,
}

impl Summary {
    /// Runs `step`, prints its closing line with the time it took, and records it.
    // Step timings are for the person reading the log, so the wall clock is right here.
    #[allow(clippy::disallowed_methods)]
    pub(crate) fn time(&mut self, name: &str, step: impl FnOnce() -> Outcome) -> Outcome {
        let started = Instant::now();
        let outcome = step();
        let seconds = started.elapsed().as_secs_f64();
        println!("==> {name} {} in {seconds:.1}s", outcome.word());
        self.steps.push((name.to_owned(), outcome, seconds));
        outcome
    }

    /// The names of the steps that failed, in order.
    pub(crate) fn failed(&self) -> Vec<&str> {
        self.steps
            .iter()
            .filter(|(_, outcome, _)| *outcome == Outcome::Failed)
            .map(|(name, _, _)| name.as_str())
            .collect()
    }

    /// The table of every step, then the total (`total` seconds: the whole run, which
    /// includes what no step timed, such as building xtask).
    pub(crate) fn table(&self, total: f64) -> String {
        let mut out = String::from("| step | result | time |\n|---|---|---:|\n");
        for (name, outcome, seconds) in &self.steps {
            out.push_str(&format!(
                "| {name} | {} | {} |\n",
                outcome.word(),
                duration(*seconds)
            ));
        }
        let failed = self.failed().len();
        let result = if failed == 0 {
            "ok".to_owned()
        } else {
            format!("FAILED ({failed})")
        };
        out.push_str(&format!("| total | {result} | {} |\n", duration(total)));
        out
    }
}

/// `12.3 s` under a minute, `4 min 05 s` from one minute on.
fn duration(seconds: f64) -> String {
    if seconds < 59.95 {
        format!("{seconds:.1} s")
    } else {
        let whole = seconds.round() as u64;
        format!("{} min {:02} s", whole / 60, whole % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_seconds_then_minutes() {
        assert_eq!(duration(0.04), "0.0 s");
        assert_eq!(duration(12.34), "12.3 s");
        assert_eq!(duration(59.96), "1 min 00 s");
        assert_eq!(duration(245.4), "4 min 05 s");
        assert_eq!(duration(1830.0), "30 min 30 s");
    }

    #[test]
    fn the_table_lists_every_step_and_the_failures_in_the_total() {
        let mut summary = Summary::default();
        assert_eq!(summary.time("tidy", || Outcome::Passed), Outcome::Passed);
        summary.time("book", || Outcome::Skipped);
        summary.time("clippy", || Outcome::from_ok(false));
        assert_eq!(summary.failed(), ["clippy"]);
        let table = summary.table(75.0);
        let rows: Vec<&str> = table.lines().collect();
        assert_eq!(rows.len(), 6, "{table}");
        assert!(rows[2].starts_with("| tidy | ok | "), "{table}");
        assert!(rows[3].starts_with("| book | SKIPPED | "), "{table}");
        assert!(rows[4].starts_with("| clippy | FAILED | "), "{table}");
        assert_eq!(rows[5], "| total | FAILED (1) | 1 min 15 s |");
    }

    #[test]
    fn a_run_with_no_failure_totals_ok() {
        let mut summary = Summary::default();
        summary.time("format", || Outcome::Passed);
        assert!(summary.failed().is_empty());
        assert!(summary.table(3.0).ends_with("| total | ok | 3.0 s |\n"));
    }
}
