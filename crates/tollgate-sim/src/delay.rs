//! Times drawn per call: how long a call takes to reach the provider (the network) and how
//! long an accepted one takes to answer, so that concurrent calls arrive in another order
//! than they were sent and come back in another order than they were admitted, as real
//! ones do.

use std::time::Duration;

use crate::{SimConfig, SimRng};

/// A duration, fixed or drawn per call from a distribution between two bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SimDelay {
    /// Always this long (no draw).
    Fixed(Duration),
    /// Uniform between `min` and `max` (inclusive, in whole nanoseconds).
    Uniform {
        /// The shortest.
        min: Duration,
        /// The longest.
        max: Duration,
    },
    /// Log-normal: the logarithm of the time is normal, centred on the geometric mean of
    /// `min` and `max`, which lie two standard deviations either side of it (95% of draws
    /// fall between them; the rest are clamped to them). A long tail to the right, as
    /// answer times have.
    LogNormal {
        /// The shortest.
        min: Duration,
        /// The longest.
        max: Duration,
    },
}

impl Default for SimDelay {
    /// No delay.
    fn default() -> Self {
        SimDelay::ZERO
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl SimDelay {
    /// No delay.
    pub const ZERO: SimDelay = SimDelay::Fixed(Duration::ZERO);

    /// The shortest it can be.
    pub fn min(&self) -> Duration {
        match *self {
            SimDelay::Fixed(d) => d,
            SimDelay::Uniform { min, max } | SimDelay::LogNormal { min, max } => min.min(max),
        }
    }

    /// The longest it can be.
    pub fn max(&self) -> Duration {
        match *self {
            SimDelay::Fixed(d) => d,
            SimDelay::Uniform { min, max } | SimDelay::LogNormal { min, max } => min.max(max),
        }
    }

    /// Whether it draws (its bounds differ): a fixed delay takes nothing from the
    /// generator.
    pub fn is_random(&self) -> bool {
        self.min() != self.max()
    }

    /// One delay, drawn from `rng` if it is random.
    pub fn draw(&self, rng: &mut SimRng) -> Duration {
        let (lo, hi) = (self.min(), self.max());
        if lo == hi {
            return lo;
        }
        match self {
            SimDelay::Fixed(d) => *d,
            SimDelay::Uniform { .. } => Duration::from_nanos(rng.range(nanos(lo), nanos(hi))),
            SimDelay::LogNormal { .. } => {
                // At least 1 ns, so that the logarithm exists.
                let (lo_ns, hi_ns) = (nanos(lo).max(1) as f64, nanos(hi) as f64);
                let centre = (lo_ns.ln() + hi_ns.ln()) / 2.0;
                let sigma = (hi_ns.ln() - lo_ns.ln()) / 4.0;
                // Box-Muller; `1 - unit` is in (0, 1], so its logarithm is finite.
                let (u, v) = (1.0 - rng.unit(), rng.unit());
                let normal = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
                let ns = (centre + sigma * normal).exp().clamp(lo_ns, hi_ns);
                Duration::from_nanos(ns as u64)
            }
        }
    }
}

/// A provider's draws, replayable: the network delay of each call in the order calls are
/// sent, and the answer time of each accepted call in the order they are admitted, from
/// two independent streams seeded by [`SimConfig::seed`]. A fresh `SimTimings` from the
/// same configuration gives the same sequences as the provider draws, so an oracle can
/// replay a run's delays (`SimTimings::new(provider.config())`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimTimings {
    network: SimDelay,
    answer: Option<SimDelay>,
    base: Duration,
    per_output_token: Duration,
    network_rng: SimRng,
    answer_rng: SimRng,
}

/// Mixed into the seed of each stream, so that neither repeats the overload draws.
const NETWORK_STREAM: u64 = 0x6E65_7477_6F72_6B00;
const ANSWER_STREAM: u64 = 0x616E_7377_6572_7300;

impl SimTimings {
    /// The draws `config` makes, from its first call.
    pub fn new(config: &SimConfig) -> Self {
        SimTimings {
            network: config.network_delay,
            answer: config.answer_time,
            base: config.latency.base,
            per_output_token: config.latency.per_output_token,
            network_rng: SimRng::new(config.seed ^ NETWORK_STREAM),
            answer_rng: SimRng::new(config.seed ^ ANSWER_STREAM),
        }
    }

    /// The next call's time from its send to its arrival at the provider.
    pub fn next_network_delay(&mut self) -> Duration {
        self.network.draw(&mut self.network_rng)
    }

    /// The next accepted call's time from its admission to its answer, producing
    /// `output_tokens`: [`SimConfig::answer_time`] drawn (or the fixed
    /// [`SimLatency::base`](crate::SimLatency::base)), plus
    /// [`SimLatency::per_output_token`](crate::SimLatency::per_output_token) per token.
    pub fn next_answer_time(&mut self, output_tokens: u64) -> Duration {
        let first = match &self.answer {
            Some(delay) => delay.draw(&mut self.answer_rng),
            None => self.base,
        };
        first.saturating_add(
            self.per_output_token
                .saturating_mul(u32::try_from(output_tokens).unwrap_or(u32::MAX)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_fixed_delay_draws_nothing() {
        let mut rng = SimRng::new(3);
        assert_eq!(SimDelay::Fixed(5 * MS).draw(&mut rng), 5 * MS);
        assert_eq!(
            SimDelay::Uniform {
                min: 7 * MS,
                max: 7 * MS
            }
            .draw(&mut rng),
            7 * MS
        );
        assert_eq!(rng, SimRng::new(3));
    }

    #[test]
    fn a_uniform_delay_spreads_evenly_between_its_bounds() {
        let delay = SimDelay::Uniform {
            min: 20 * MS,
            max: 800 * MS,
        };
        let mut rng = SimRng::new(5);
        let draws: Vec<_> = (0..10_000).map(|_| delay.draw(&mut rng)).collect();
        assert!(draws.iter().all(|d| (20 * MS..=800 * MS).contains(d)));
        // Each quarter of the range holds about a quarter of the draws.
        for q in 0..4u32 {
            let (lo, hi) = (20 * MS + 195 * MS * q, 20 * MS + 195 * MS * (q + 1));
            let n = draws.iter().filter(|d| (lo..hi).contains(*d)).count();
            assert!((2_300..2_700).contains(&n), "quarter {q}: {n}");
        }
    }

    #[test]
    fn a_log_normal_delay_centres_on_the_geometric_mean_with_95_percent_inside_its_bounds() {
        let delay = SimDelay::LogNormal {
            min: 20 * MS,
            max: 800 * MS,
        };
        let mut rng = SimRng::new(9);
        let mut draws: Vec<_> = (0..10_000).map(|_| delay.draw(&mut rng)).collect();
        assert!(draws.iter().all(|d| (20 * MS..=800 * MS).contains(d)));
        draws.sort();
        // The median is sqrt(20 * 800) = 126.5 ms.
        let median = draws[draws.len() / 2];
        assert!((115 * MS..140 * MS).contains(&median), "{median:?}");
        // About 2.3% of draws on each side fall beyond two deviations, clamped.
        let at_bounds = draws
            .iter()
            .filter(|d| **d == 20 * MS || **d == 800 * MS)
            .count();
        assert!((350..560).contains(&at_bounds), "{at_bounds}");
        // Skewed right: the mean is above the median.
        let mean = draws.iter().sum::<Duration>() / 10_000;
        assert!(mean > median, "{mean:?} {median:?}");
    }

    #[test]
    fn timings_replay_the_same_sequences_from_the_same_seed() {
        let config = SimConfig::new(crate::SimLimits::default())
            .with_seed(4)
            .with_network_delay(SimDelay::Uniform {
                min: MS,
                max: 100 * MS,
            })
            .with_answer_time(SimDelay::LogNormal {
                min: 20 * MS,
                max: 800 * MS,
            });
        let draw = |t: &mut SimTimings| {
            (0..50)
                .map(|_| (t.next_network_delay(), t.next_answer_time(0)))
                .collect::<Vec<_>>()
        };
        let (mut a, mut b) = (SimTimings::new(&config), SimTimings::new(&config));
        let first = draw(&mut a);
        assert_eq!(first, draw(&mut b));
        // The streams are independent: drawing only network delays does not shift them.
        let mut c = SimTimings::new(&config);
        let networks: Vec<_> = (0..50).map(|_| c.next_network_delay()).collect();
        assert_eq!(networks, first.iter().map(|(n, _)| *n).collect::<Vec<_>>());
        let mut other = SimTimings::new(&config.clone().with_seed(5));
        assert_ne!(first, draw(&mut other));
    }

    #[test]
    fn answer_time_adds_the_per_token_time_to_the_fixed_base_without_a_distribution() {
        let config = SimConfig::new(crate::SimLimits::default());
        let mut t = SimTimings::new(&config);
        assert_eq!(t.next_answer_time(20), 300 * MS + 20 * 15 * MS);
        assert_eq!(t.next_network_delay(), Duration::ZERO);
    }
}
