//! Summaries of measured values: nearest-rank percentiles over microseconds, shown in milliseconds.

use serde_json::{Value, json};

/// The nearest-rank percentile of sorted values: the smallest value such that at least `p` percent
/// of all values are at or below it (`p` in 0..=100; 0 gives the smallest). None when empty.
pub fn percentile(sorted: &[i64], p: f64) -> Option<i64> {
    debug_assert!(sorted.windows(2).all(|w| w[0] <= w[1]), "percentile needs sorted values");
    if sorted.is_empty() {
        return None;
    }
    let p = p.clamp(0.0, 100.0);
    // The rank is 1-based: ceil(p/100 * n), at least 1.
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// A summary of values in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub count: usize,
    pub min_us: i64,
    pub p50_us: i64,
    pub p90_us: i64,
    pub p99_us: i64,
    pub max_us: i64,
    pub mean_us: f64,
}

impl Summary {
    /// Summarizes `values` (microseconds; sorted in place). None when there are none.
    pub fn of(values: &mut [i64]) -> Option<Summary> {
        values.sort_unstable();
        let pct = |p| percentile(values, p);
        let sum: i128 = values.iter().map(|v| i128::from(*v)).sum();
        Some(Summary {
            count: values.len(),
            min_us: *values.first()?,
            p50_us: pct(50.0)?,
            p90_us: pct(90.0)?,
            p99_us: pct(99.0)?,
            max_us: *values.last()?,
            mean_us: sum as f64 / values.len() as f64,
        })
    }

    /// The summary in milliseconds, as JSON: `{count, min, p50, p90, p99, max, mean}`.
    pub fn to_json(&self) -> Value {
        json!({
            "count": self.count,
            "min": ms(self.min_us),
            "p50": ms(self.p50_us),
            "p90": ms(self.p90_us),
            "p99": ms(self.p99_us),
            "max": ms(self.max_us),
            "mean": (self.mean_us / 10.0).round() / 100.0,
        })
    }
}

/// Microseconds as milliseconds, rounded to hundredths.
pub fn ms(us: i64) -> f64 {
    (us as f64 / 10.0).round() / 100.0
}

/// Milliseconds with two decimals, for tables.
pub fn ms_text(us: i64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_of_one_to_a_hundred_are_the_ranks_themselves() {
        let values: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&values, 50.0), Some(50));
        assert_eq!(percentile(&values, 90.0), Some(90));
        assert_eq!(percentile(&values, 99.0), Some(99));
        assert_eq!(percentile(&values, 100.0), Some(100));
        assert_eq!(percentile(&values, 0.0), Some(1));
    }

    #[test]
    fn percentiles_of_few_values_round_the_rank_up() {
        // Ten values: p99 is the 10th (ceil(9.9)), p50 the 5th, p90 the 9th.
        let values: Vec<i64> = (10..=100).step_by(10).collect();
        assert_eq!(percentile(&values, 50.0), Some(50));
        assert_eq!(percentile(&values, 90.0), Some(90));
        assert_eq!(percentile(&values, 99.0), Some(100));
        assert_eq!(percentile(&[7], 99.0), Some(7));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn summary_sorts_and_reports_milliseconds() {
        let mut values = vec![3_000, 1_000, 2_000, 4_000, 250_000];
        let s = Summary::of(&mut values).expect("values");
        assert_eq!((s.count, s.min_us, s.p50_us, s.max_us), (5, 1_000, 3_000, 250_000));
        assert_eq!(s.p99_us, 250_000);
        assert!((s.mean_us - 52_000.0).abs() < 1e-9);
        let j = s.to_json();
        assert_eq!(j["p50"], 3.0);
        assert_eq!(j["max"], 250.0);
        assert_eq!(j["mean"], 52.0);
        assert!(Summary::of(&mut []).is_none());
    }

    #[test]
    fn milliseconds_round_to_hundredths() {
        assert_eq!(ms(1_234), 1.23);
        assert_eq!(ms(1_236), 1.24);
        assert_eq!(ms(-500), -0.5);
        assert_eq!(ms_text(12_346), "12.35");
    }
}
