//! A seeded xorshift generator and a Zipf sampler: the same seed gives the same workload.

/// xorshift64* (Vigna): small, fast and good enough to draw a workload.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        // Any seed, including 0, gives a non-zero state.
        let mut rng = Self(seed ^ 0x9E37_79B9_7F4A_7C15);
        if rng.0 == 0 {
            rng.0 = 1;
        }
        rng.next_u64();
        rng
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.unit() * n as f64) as usize).min(n - 1)
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

/// Zipf over ranks `0..n` with exponent `s`: rank `k` has weight `1 / (k + 1)^s`. Sampled by
/// inverting the cumulative table (a binary search).
pub struct Zipf {
    cumulative: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize, s: f64) -> Self {
        let mut total = 0.0;
        let cumulative = (0..n.max(1))
            .map(|k| {
                total += 1.0 / ((k + 1) as f64).powf(s);
                total
            })
            .collect();
        Self { cumulative }
    }

    pub fn sample(&self, rng: &mut Rng) -> usize {
        let total = self.cumulative[self.cumulative.len() - 1];
        let u = rng.unit() * total;
        self.cumulative
            .partition_point(|&c| c <= u)
            .min(self.cumulative.len() - 1)
    }

    /// The probability of rank `k`.
    pub fn share(&self, k: usize) -> f64 {
        let total = self.cumulative[self.cumulative.len() - 1];
        let below = if k == 0 { 0.0 } else { self.cumulative[k - 1] };
        (self.cumulative[k] - below) / total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_draws_the_same_numbers() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        assert!((0..100).all(|_| a.next_u64() == b.next_u64()));
    }

    #[test]
    fn zipf_of_exponent_one_gives_the_first_rank_one_over_the_harmonic_number() {
        let zipf = Zipf::new(1000, 1.0);
        let harmonic: f64 = (1..=1000).map(|k| 1.0 / k as f64).sum();
        assert!((zipf.share(0) - 1.0 / harmonic).abs() < 1e-12);
        let mut rng = Rng::new(1);
        let draws = 200_000;
        let firsts = (0..draws).filter(|_| zipf.sample(&mut rng) == 0).count();
        let expected = draws as f64 / harmonic;
        assert!((firsts as f64 - expected).abs() < expected * 0.05);
    }
}
