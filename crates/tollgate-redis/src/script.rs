//! The reservation script (`limiter.lua`), with the throttle's constants filled in.

use std::sync::LazyLock;
use std::time::Duration;

use tollgate::limit::throttle;

/// The script's source, with the throttle's constants filled in.
pub(crate) static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| {
    let us = |d: Duration| d.as_micros().to_string();
    let src = include_str!("limiter.lua")
        .replace("@HOLDOFF_US@", &us(throttle::DECREASE_HOLDOFF))
        .replace("@RECOVERY_US@", &us(throttle::RECOVERY_DELAY))
        .replace(
            "@RATE_LIMITED_BETA@",
            &throttle::RATE_LIMITED_BETA.to_string(),
        )
        .replace("@OVERLOADED_BETA@", &throttle::OVERLOADED_BETA.to_string())
        .replace("@MIN_RATE_FACTOR@", &throttle::MIN_RATE_FACTOR.to_string())
        .replace(
            "@APPROACH_PER_SECOND@",
            &throttle::APPROACH_PER_SECOND.to_string(),
        );
    redis::Script::new(&src)
});
