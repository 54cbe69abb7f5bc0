//! The simulator's random source: SplitMix64, small, fast and the same on every
//! platform, so one seed gives one run. Not for anything that must be unpredictable.

/// A seeded SplitMix64 generator (Steele, Lea and Flood, "Fast splittable pseudorandom
/// number generators", OOPSLA 2014; the constants are theirs).
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// A generator for the `index`th part of a run seeded with `seed` (one per link), whose
    /// numbers do not overlap its neighbours' in any test-sized run.
    pub fn derive(seed: u64, index: u64) -> Rng {
        let mut mix = Rng::new(seed ^ index.wrapping_mul(0xd1b5_4a32_d192_ed03));
        Rng::new(mix.next_u64())
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform number in [0, 1), with 53 bits of precision.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (false for p ≤ 0, true for p ≥ 1). Draws one number
    /// whatever `p` is, so changing a probability does not shift the numbers that follow.
    pub fn chance(&mut self, p: f64) -> bool {
        let u = self.unit();
        u < p
    }

    /// A standard normal number (Box-Muller; one of the pair is thrown away so each call
    /// draws exactly two numbers).
    pub fn normal(&mut self) -> f64 {
        // 1 - unit() is in (0, 1], so the logarithm is finite.
        let u1 = 1.0 - self.unit();
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_numbers_and_different_seeds_differ() {
        let a: Vec<u64> = (0..8)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..8)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let c: Vec<u64> = (0..8)
            .scan(Rng::new(8), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(Rng::derive(1, 0).next_u64(), Rng::derive(1, 1).next_u64());
    }

    #[test]
    fn splitmix_reference_value() {
        // The first output for seed 0 from the reference implementation.
        assert_eq!(Rng::new(0).next_u64(), 0xe220_a839_7b1d_cdaf);
    }

    #[test]
    fn unit_and_normal_have_the_right_moments() {
        let mut r = Rng::new(42);
        let n = 200_000;
        let (mut s, mut s2) = (0.0, 0.0);
        for _ in 0..n {
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
            s += u;
        }
        assert!((s / n as f64 - 0.5).abs() < 0.01);
        s = 0.0;
        for _ in 0..n {
            let x = r.normal();
            s += x;
            s2 += x * x;
        }
        let mean = s / n as f64;
        assert!(mean.abs() < 0.01, "{mean}");
        assert!((s2 / n as f64 - 1.0).abs() < 0.02);
    }
}
