//! What a call costs the limiter, and how a provider counts it afterwards.

use crate::catalog::Dimension;
use crate::usage::Usage;

/// What one call reserves: one request, its input tokens and its output limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Cost {
    /// Requests (1 for a call).
    pub requests: u64,
    /// Input tokens (an estimate before sending).
    pub input_tokens: u64,
    /// Output tokens (the output limit before sending).
    pub output_tokens: u64,
}

impl Cost {
    /// One request with these token counts.
    pub fn call(input_tokens: u64, output_tokens: u64) -> Self {
        Cost {
            requests: 1,
            input_tokens,
            output_tokens,
        }
    }

    /// What this cost takes from dimension `d`'s bucket.
    pub fn on(&self, d: Dimension) -> u64 {
        match d {
            Dimension::Requests => self.requests,
            Dimension::Tokens => self.input_tokens.saturating_add(self.output_tokens),
            Dimension::InputTokens => self.input_tokens,
            Dimension::OutputTokens => self.output_tokens,
        }
    }
}

/// A signed correction to a reservation, applied at settle time: negative gives
/// capacity back, positive takes more (debt, so later waiters wait longer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CostDelta {
    /// Requests.
    pub requests: i64,
    /// Input tokens.
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
}

impl CostDelta {
    /// The delta that undoes `cost` entirely (a full refund).
    pub fn refund(cost: &Cost) -> Self {
        CostDelta {
            requests: -to_i64(cost.requests),
            input_tokens: -to_i64(cost.input_tokens),
            output_tokens: -to_i64(cost.output_tokens),
        }
    }

    /// The correction that turns a charge of `reserved` into one of `counted`.
    pub fn between(counted: &Cost, reserved: &Cost) -> Self {
        let diff = |a: u64, b: u64| to_i64(a).saturating_sub(to_i64(b));
        CostDelta {
            requests: diff(counted.requests, reserved.requests),
            input_tokens: diff(counted.input_tokens, reserved.input_tokens),
            output_tokens: diff(counted.output_tokens, reserved.output_tokens),
        }
    }

    /// What this delta does to dimension `d`'s bucket.
    pub fn on(&self, d: Dimension) -> i64 {
        match d {
            Dimension::Requests => self.requests,
            Dimension::Tokens => self.input_tokens.saturating_add(self.output_tokens),
            Dimension::InputTokens => self.input_tokens,
            Dimension::OutputTokens => self.output_tokens,
        }
    }

    /// True when the delta changes nothing.
    pub fn is_zero(&self) -> bool {
        *self == CostDelta::default()
    }
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// How output tokens count against a provider's limit after the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OutputAccounting {
    /// The provider counts the output limit that was asked for, whatever was produced
    /// (e.g. OpenAI's `max_tokens` is charged up front).
    #[default]
    Reserved,
    /// The provider counts the output actually produced (e.g. Anthropic's output TPM).
    Actual,
}

/// How prompt-cache reads count against a provider's input limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CacheReadAccounting {
    /// Cache reads count as input tokens (e.g. OpenAI's TPM).
    #[default]
    CountAsInput,
    /// Cache reads do not count (e.g. Anthropic's input TPM for most models).
    NotCounted,
}

/// How a provider counts a finished call against its limits. Provider crates say which
/// rule their provider follows; [`crate::limit::Reservation::settle`] applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AccountingRule {
    /// How output counts.
    pub output: OutputAccounting,
    /// How cache reads count.
    pub cache_reads: CacheReadAccounting,
}

impl AccountingRule {
    /// What the provider counts for a call that reserved `reserved` and reported `usage`.
    ///
    /// A usage that reports no input at all (0) for a call that sent some is read as not
    /// reported, and the estimate stands: no prompt is free, and refunding the whole
    /// estimate would let the bucket run ahead of the provider (llmock, for one, reports
    /// `prompt_tokens: 0` for prompts it charges).
    pub fn counted(&self, reserved: &Cost, usage: &Usage) -> Cost {
        let input = if usage.total_input_tokens() == 0 {
            reserved.input_tokens
        } else {
            match self.cache_reads {
                CacheReadAccounting::CountAsInput => usage.total_input_tokens(),
                CacheReadAccounting::NotCounted => {
                    usage.total_input_tokens() - usage.cache_read_tokens
                }
            }
        };
        let output = match self.output {
            OutputAccounting::Reserved => reserved.output_tokens.max(usage.output_tokens),
            OutputAccounting::Actual => usage.output_tokens,
        };
        Cost {
            requests: reserved.requests,
            input_tokens: input,
            output_tokens: output,
        }
    }

    /// The correction from `reserved` to what the provider counts.
    pub fn delta(&self, reserved: &Cost, usage: &Usage) -> CostDelta {
        CostDelta::between(&self.counted(reserved, usage), reserved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_maps_onto_each_dimension() {
        let c = Cost::call(100, 20);
        assert_eq!(c.on(Dimension::Requests), 1);
        assert_eq!(c.on(Dimension::Tokens), 120);
        assert_eq!(c.on(Dimension::InputTokens), 100);
        assert_eq!(c.on(Dimension::OutputTokens), 20);
    }

    #[test]
    fn accounting_reserved_output_keeps_the_limit_and_actual_output_refunds_the_rest() {
        let reserved = Cost::call(100, 1000);
        let usage = Usage {
            input_tokens: 100,
            output_tokens: 50,
            ..Usage::default()
        };
        let keep = AccountingRule {
            output: OutputAccounting::Reserved,
            ..Default::default()
        };
        assert!(keep.delta(&reserved, &usage).is_zero());
        let actual = AccountingRule {
            output: OutputAccounting::Actual,
            ..Default::default()
        };
        assert_eq!(
            actual.delta(&reserved, &usage),
            CostDelta {
                output_tokens: -950,
                ..Default::default()
            }
        );
    }

    #[test]
    fn accounting_keeps_the_input_estimate_when_the_provider_reports_no_input() {
        let reserved = Cost::call(300, 100);
        let silent = Usage {
            output_tokens: 40,
            ..Usage::default()
        };
        let rule = AccountingRule {
            output: OutputAccounting::Actual,
            ..Default::default()
        };
        assert_eq!(rule.counted(&reserved, &silent).input_tokens, 300);
        let reported = Usage {
            input_tokens: 120,
            output_tokens: 40,
            ..Usage::default()
        };
        assert_eq!(rule.counted(&reserved, &reported).input_tokens, 120);
    }

    #[test]
    fn accounting_cache_reads_count_or_not_by_rule() {
        let reserved = Cost::call(1000, 10);
        let usage = Usage {
            input_tokens: 100,
            cache_read_tokens: 900,
            output_tokens: 10,
            ..Usage::default()
        };
        let counted = AccountingRule {
            cache_reads: CacheReadAccounting::CountAsInput,
            ..Default::default()
        };
        assert_eq!(counted.delta(&reserved, &usage).input_tokens, 0);
        let not = AccountingRule {
            cache_reads: CacheReadAccounting::NotCounted,
            ..Default::default()
        };
        assert_eq!(not.delta(&reserved, &usage).input_tokens, -900);
    }

    #[test]
    fn accounting_underestimated_input_is_charged_as_debt() {
        let reserved = Cost::call(100, 10);
        let usage = Usage {
            input_tokens: 400,
            output_tokens: 10,
            ..Usage::default()
        };
        assert_eq!(
            AccountingRule::default()
                .delta(&reserved, &usage)
                .input_tokens,
            300
        );
    }
}
