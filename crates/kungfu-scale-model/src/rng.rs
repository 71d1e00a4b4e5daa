//! SplitMix64: a small, fast, seedable generator with a fixed output sequence. The model needs
//! reproducibility across machines and releases, not cryptographic quality, and owning the dozen
//! lines keeps a dependency (and its version's stream) out of the documented numbers.

/// A seeded pseudo-random generator (Steele, Lea, Flood 2014: SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The next 64 uniformly distributed bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.state)
    }

    /// A uniform float in `[0, 1)`, from the top 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in `[0, n)`; `n` must be positive. Lemire's multiply-shift: the bias is
    /// below 2^-32 for the sizes the model uses, far under its sampling noise.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }

    /// An independent generator for one purpose, so adding draws to one stream does not shift
    /// another (the world and the action stream are drawn from separate forks).
    pub fn fork(&mut self, purpose: u64) -> Rng {
        Rng::new(mix(self.next_u64() ^ purpose.wrapping_mul(0xD1B5_4A32_D192_ED03)))
    }
}

/// The SplitMix64 finalizer: a bijective 64-bit mixer, also the model's stable hash.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_gives_same_stream() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn first_output_is_splitmix64s() {
        // The reference sequence of SplitMix64 seeded with 0.
        assert_eq!(Rng::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = Rng::new(1);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            let x = r.below(10) as usize;
            seen[x] += 1;
        }
        assert!(seen.iter().all(|&c| (800..1200).contains(&c)), "{seen:?}");
    }
}
