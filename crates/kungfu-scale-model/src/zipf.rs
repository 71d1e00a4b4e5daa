//! Zipf sampling: rank `k` of `1..=n` with probability proportional to `1 / k^s`. Sizes and activity
//! of agents, threads and Tasks are skewed this way in real deployments (a few busy agents and hot
//! threads, a long tail); the hottest group's share, which caps scaling, comes from this skew.

use crate::rng::Rng;

/// A Zipf distribution over `1..=n`, sampled by binary search in its cumulative table (exact, and
/// cheap for the sizes of the model: one table of `n` floats).
#[derive(Clone, Debug)]
pub struct Zipf {
    cdf: Vec<f64>,
    s: f64,
}

impl Zipf {
    /// `n >= 1` ranks with exponent `s >= 0` (`s = 0` is uniform).
    pub fn new(n: usize, s: f64) -> Zipf {
        assert!(n >= 1 && s >= 0.0, "Zipf needs n >= 1 and s >= 0");
        let mut cdf = Vec::with_capacity(n);
        let mut total = 0.0;
        for k in 1..=n {
            total += 1.0 / (k as f64).powf(s);
            cdf.push(total);
        }
        for c in &mut cdf {
            *c /= total;
        }
        Zipf { cdf, s }
    }

    pub fn n(&self) -> usize {
        self.cdf.len()
    }

    pub fn exponent(&self) -> f64 {
        self.s
    }

    /// The probability of rank `k` (1-based).
    pub fn p(&self, k: usize) -> f64 {
        assert!(k >= 1 && k <= self.n(), "rank {k} outside 1..={}", self.n());
        let below = if k == 1 { 0.0 } else { self.cdf[k - 2] };
        self.cdf[k - 1] - below
    }

    /// A rank in `1..=n`.
    pub fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.next_f64();
        // The first rank whose cumulative probability exceeds u.
        let i = self.cdf.partition_point(|&c| c <= u);
        i.min(self.n() - 1) + 1
    }

    /// A 0-based index, for indexing a table of `n` objects ordered by rank.
    pub fn index(&self, rng: &mut Rng) -> usize {
        self.sample(rng) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probabilities_follow_the_power_law_and_sum_to_one() {
        let z = Zipf::new(100, 1.0);
        let total: f64 = (1..=100).map(|k| z.p(k)).sum();
        assert!((total - 1.0).abs() < 1e-9);
        // p(1) / p(k) = k^s.
        assert!((z.p(1) / z.p(10) - 10.0).abs() < 1e-9);
        let h100: f64 = (1..=100).map(|k| 1.0 / k as f64).sum();
        assert!((z.p(1) - 1.0 / h100).abs() < 1e-12);
    }

    #[test]
    fn sampled_frequencies_match_the_distribution() {
        let z = Zipf::new(50, 1.2);
        let mut rng = Rng::new(42);
        let draws = 200_000;
        let mut counts = vec![0u32; 51];
        for _ in 0..draws {
            let k = z.sample(&mut rng);
            assert!((1..=50).contains(&k));
            counts[k] += 1;
        }
        for k in [1, 2, 5, 20] {
            let observed = counts[k] as f64 / draws as f64;
            let expected = z.p(k);
            // Five standard deviations of a binomial proportion.
            let sigma = (expected * (1.0 - expected) / draws as f64).sqrt();
            assert!((observed - expected).abs() < 5.0 * sigma, "rank {k}: {observed} vs {expected}");
        }
        // Skew: rank 1 is drawn more often than rank 2, which is drawn more often than rank 20.
        assert!(counts[1] > counts[2] && counts[2] > counts[20]);
    }

    #[test]
    fn exponent_zero_is_uniform_and_one_rank_is_certain() {
        let z = Zipf::new(4, 0.0);
        for k in 1..=4 {
            assert!((z.p(k) - 0.25).abs() < 1e-12);
        }
        let one = Zipf::new(1, 2.0);
        let mut rng = Rng::new(3);
        assert!((0..100).all(|_| one.sample(&mut rng) == 1));
    }
}
