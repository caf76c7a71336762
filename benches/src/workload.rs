//! Seeded request sizes.

use tollgate_sim::{SimRequest, SimRng};

/// Ranges that request sizes are drawn from, uniformly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// Input tokens, inclusive.
    pub input: (u64, u64),
    /// Output limit (`max_tokens`), inclusive.
    pub max_output: (u64, u64),
    /// Output actually produced, in percent of the limit, inclusive.
    pub actual_percent: (u64, u64),
}

impl Sizes {
    /// Benchmark 2's mix: input 200–8,000, output limit 256–4,096, output produced 20–100%
    /// of the limit.
    pub const PACING: Sizes = Sizes {
        input: (200, 8_000),
        max_output: (256, 4_096),
        actual_percent: (20, 100),
    };

    /// Draws one request.
    pub fn draw(&self, rng: &mut SimRng) -> SimRequest {
        let input = rng.range(self.input.0, self.input.1);
        let max_output = rng.range(self.max_output.0, self.max_output.1);
        let percent = rng.range(self.actual_percent.0, self.actual_percent.1);
        SimRequest::new(input, max_output, (max_output * percent).div_ceil(100))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_stay_in_range() {
        let mut rng = SimRng::new(3);
        for _ in 0..1000 {
            let r = Sizes::PACING.draw(&mut rng);
            assert!((200..=8000).contains(&r.input_tokens));
            assert!((256..=4096).contains(&r.max_output));
            assert!(r.actual_output * 5 >= r.max_output && r.actual_output <= r.max_output);
        }
    }
}
