//! The statistics of experiments: summaries of repeated runs, Student-t confidence
//! intervals, Welch's t-test and the two-sample Kolmogorov-Smirnov test on latency
//! histograms. Pure arithmetic on numbers passed in; no I/O.
//!
//! Distributions come from `statrs` (Student's t through its regularized incomplete
//! beta function and its inverse); only the Kolmogorov distribution's tail, which
//! `statrs` does not have, is summed here from its two classic series. The
//! reference figures in the tests below were computed with SciPy 1.17.1
//! (`scipy.stats.t.ppf`, `ttest_ind(equal_var=False)`, `kstwobign.sf`) and are quoted
//! with the call that produced them.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Mean, spread and range of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator); 0 for a single value.
    pub stdev: f64,
    pub min: f64,
    pub max: f64,
}

/// Summarize a sample; `None` when it is empty or holds a non-finite value.
pub fn summarize(xs: &[f64]) -> Option<Summary> {
    if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let n = xs.len();
    let mean = xs.iter().sum::<f64>() / n as f64;
    let stdev = if n > 1 {
        (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some(Summary {
        n,
        mean,
        stdev,
        min,
        max,
    })
}

/// The `p` quantile of Student's t distribution with `df` degrees of freedom;
/// `None` outside 0 < p < 1 or for df ≤ 0.
pub fn t_quantile(p: f64, df: f64) -> Option<f64> {
    // Written so that NaN fails every test.
    let valid = p > 0.0 && p < 1.0 && df > 0.0;
    if !valid {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, df).ok()?;
    Some(t.inverse_cdf(p))
}

/// A two-sided confidence interval for a mean.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ConfInterval {
    /// Confidence level, e.g. 0.95.
    pub level: f64,
    pub low: f64,
    pub high: f64,
    /// Half the interval's width: t(1 − α/2, n − 1) · s / √n.
    pub half_width: f64,
    /// The mean the interval is around (`low`/`high` may be cut at the figure's
    /// bounds, [`ConfInterval::within`]). Absent from older documents: 0.
    #[serde(default)]
    pub mean: f64,
}

impl ConfInterval {
    /// The half width as a percentage of the mean (`None` for a zero mean).
    pub fn half_width_pct(&self) -> Option<f64> {
        let mean = if self.mean != 0.0 {
            self.mean
        } else {
            // A document from before `mean` was written: its interval was not cut.
            (self.low + self.high) / 2.0
        };
        (mean != 0.0).then(|| self.half_width / mean.abs() * 100.0)
    }

    /// The interval cut to the values the figure can take: a count, a rate or a delay
    /// is never negative, a share never above 100 %. The half width stays the
    /// statistic's (it still measures the spread).
    pub fn within(self, min: f64, max: f64) -> ConfInterval {
        ConfInterval {
            low: self.low.clamp(min, max),
            high: self.high.clamp(min, max),
            ..self
        }
    }
}

/// The Student-t confidence interval of `s`'s mean at `level` (0 < level < 1); `None`
/// with fewer than two values, where the spread is unknown.
pub fn confidence_interval(s: &Summary, level: f64) -> Option<ConfInterval> {
    if s.n < 2 {
        return None;
    }
    let t = t_quantile(1.0 - (1.0 - level) / 2.0, (s.n - 1) as f64)?;
    let half_width = t * s.stdev / (s.n as f64).sqrt();
    Some(ConfInterval {
        level,
        low: s.mean - half_width,
        high: s.mean + half_width,
        half_width,
        mean: s.mean,
    })
}

/// Welch's unequal-variance t-test of two samples' means.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Welch {
    /// (mean b − mean a) / standard error: positive when `b` is larger.
    pub t: f64,
    /// Welch-Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// Welch's t-test of `a` against `b`; `None` unless each has at least two values.
/// Two samples without any spread have a p-value of 1 when their means are equal
/// and 0 when they differ (the difference is then certain, not a chance).
pub fn welch(a: &Summary, b: &Summary) -> Option<Welch> {
    if a.n < 2 || b.n < 2 {
        return None;
    }
    let (va, vb) = (a.stdev.powi(2) / a.n as f64, b.stdev.powi(2) / b.n as f64);
    let se2 = va + vb;
    let diff = b.mean - a.mean;
    if se2 == 0.0 {
        let df = (a.n + b.n - 2) as f64;
        return Some(if diff == 0.0 {
            Welch { t: 0.0, df, p: 1.0 }
        } else {
            Welch {
                t: diff.signum() * f64::INFINITY,
                df,
                p: 0.0,
            }
        });
    }
    let t = diff / se2.sqrt();
    let df = se2.powi(2) / (va.powi(2) / (a.n - 1) as f64 + vb.powi(2) / (b.n - 1) as f64);
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    let p = (2.0 * dist.sf(t.abs())).clamp(0.0, 1.0);
    Some(Welch { t, df, p })
}

/// The two-sample Kolmogorov-Smirnov test of two histograms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct KolmogorovSmirnov {
    /// The largest distance between the two cumulative distributions.
    pub d: f64,
    /// Asymptotic p-value (see [`ks_histograms`]).
    pub p: f64,
    /// Samples in each histogram.
    pub n_a: u64,
    pub n_b: u64,
    /// The samples counted as independent for the p-value: `n_a`/`n_b`, or fewer when
    /// the samples came in clusters that share one moment (the frames of an
    /// `--isochronous` flow, the bursts of a bursty one: see [`ks_histograms_in_units`]).
    /// Absent from older documents: read as 0, "not known".
    #[serde(default)]
    pub n_eff_a: u64,
    #[serde(default)]
    pub n_eff_b: u64,
}

/// The two-sample KS test on histograms given as `[(upper bound, count)]` (netmeter's
/// `*_histogram_us` lists: HDR buckets, sorted or not), every sample taken as
/// independent: [`ks_histograms_in_units`] with each sample its own unit.
pub fn ks_histograms(a: &[(f64, u64)], b: &[(f64, u64)]) -> Option<KolmogorovSmirnov> {
    ks_histograms_in_units(a, b, u64::MAX, u64::MAX)
}

/// The two-sample KS test on histograms whose samples came in `units_a`/`units_b`
/// independent units. D is taken at every bucket bound of either histogram, so values
/// that fall in the same bucket count as equal (ties), the honest reading of binned
/// data. The p-value is the asymptotic Kolmogorov distribution's tail at
/// λ = (√nₑ + 0.12 + 0.11/√nₑ)·D with nₑ = m_a·m_b/(m_a + m_b) (Stephens'
/// small-sample correction, as in Numerical Recipes' `kstwo`), where m is a side's
/// effective sample size: its samples, or its units when there are fewer (at least 1).
///
/// Why units: the test assumes independent samples. The datagrams of an isochronous
/// frame (or of a burst) are sent at one instant and meet the same moment of the
/// path and the hosts (a queue, a stall), so a frame of 14 datagrams is closer to one
/// observation than to 14: counted as 14, the test is surer than the data allow and
/// calls an unchanged path different far more often than α. The distance D is still
/// read from every sample (the finest picture of the distribution, the one the
/// percentiles describe); only its significance is judged by the units, which assumes
/// the worst (a frame's datagrams fully alike) and so errs towards "no significant
/// change". `None` when either histogram is empty.
pub fn ks_histograms_in_units(
    a: &[(f64, u64)],
    b: &[(f64, u64)],
    units_a: u64,
    units_b: u64,
) -> Option<KolmogorovSmirnov> {
    let n_a: u64 = a.iter().map(|&(_, c)| c).sum();
    let n_b: u64 = b.iter().map(|&(_, c)| c).sum();
    if n_a == 0 || n_b == 0 {
        return None;
    }
    let mut bounds: Vec<(f64, u64, u64)> = a
        .iter()
        .map(|&(x, c)| (x, c, 0))
        .chain(b.iter().map(|&(x, c)| (x, 0, c)))
        .collect();
    bounds.sort_by(|x, y| x.0.total_cmp(&y.0));
    let (mut ca, mut cb, mut d) = (0u64, 0u64, 0.0f64);
    let mut i = 0;
    while i < bounds.len() {
        // Every entry at this bound first, then the distance.
        let x = bounds[i].0;
        while i < bounds.len() && bounds[i].0 == x {
            ca += bounds[i].1;
            cb += bounds[i].2;
            i += 1;
        }
        d = d.max((ca as f64 / n_a as f64 - cb as f64 / n_b as f64).abs());
    }
    let (m_a, m_b) = (units_a.clamp(1, n_a), units_b.clamp(1, n_b));
    let ne = (m_a as f64 * m_b as f64) / (m_a + m_b) as f64;
    let sq = ne.sqrt();
    let p = kolmogorov_sf((sq + 0.12 + 0.11 / sq) * d);
    Some(KolmogorovSmirnov {
        d,
        p,
        n_a,
        n_b,
        n_eff_a: m_a,
        n_eff_b: m_b,
    })
}

/// P(K > λ) for the Kolmogorov distribution K (the limit of √n·Dₙ).
/// For λ ≥ 1.18 the alternating series 2 Σ (−1)^(j−1) e^(−2j²λ²) converges within a few
/// terms; below it, the complementary Jacobi-theta form
/// 1 − (√(2π)/λ) Σ e^(−(2j−1)²π²/(8λ²)) does.
pub fn kolmogorov_sf(lambda: f64) -> f64 {
    if lambda.is_nan() || lambda <= 0.0 {
        return 1.0;
    }
    if lambda < 1.18 {
        let c = -std::f64::consts::PI.powi(2) / (8.0 * lambda * lambda);
        let s: f64 = (1..=8)
            .map(|j| ((2 * j - 1) as f64).powi(2) * c)
            .map(f64::exp)
            .sum();
        (1.0 - (2.0 * std::f64::consts::PI).sqrt() / lambda * s).clamp(0.0, 1.0)
    } else {
        let s: f64 = (1..=100)
            .map(|j| {
                let sign = if j % 2 == 1 { 1.0 } else { -1.0 };
                sign * (-2.0 * (j * j) as f64 * lambda * lambda).exp()
            })
            .sum();
        (2.0 * s).clamp(0.0, 1.0)
    }
}

/// `new` relative to `base` in percent; `None` when `base` is zero and `new` is not
/// (no finite percentage), 0 when both are zero.
pub fn change_pct(base: f64, new: f64) -> Option<f64> {
    if base == 0.0 {
        return (new == 0.0).then_some(0.0);
    }
    Some((new - base) / base.abs() * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn summary_of_a_known_sample() {
        // numpy: mean 5.0, std(ddof=1) 2.138089935299395 for [2,4,4,4,5,5,7,9].
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.n, 8);
        assert!(close(s.mean, 5.0, 1e-12));
        assert!(close(s.stdev, 2.138089935299395, 1e-12));
        assert_eq!((s.min, s.max), (2.0, 9.0));
        let one = summarize(&[3.5]).unwrap();
        assert_eq!((one.n, one.stdev), (1, 0.0));
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn t_quantiles_match_scipy() {
        // scipy.stats.t.ppf(q, df)
        for (q, df, want) in [
            (0.975, 1.0, 12.706204736174694),
            (0.975, 2.0, 4.302652729749462),
            (0.975, 9.0, 2.262157162798205),
            (0.995, 4.0, 4.604094871349992),
            (0.95, 30.0, 1.697260886593957),
            (0.975, 7.5, 2.333039626864974),
            (0.025, 9.0, -2.2621571627982053),
        ] {
            let got = t_quantile(q, df).unwrap();
            assert!(
                close(got, want, 1e-9 * want.abs()),
                "t({q}, {df}) = {got}, want {want}"
            );
        }
        assert!(t_quantile(1.0, 3.0).is_none());
        assert!(t_quantile(0.5, 0.0).is_none());
    }

    #[test]
    fn confidence_interval_matches_scipy() {
        // scipy.stats.t.interval(0.95, 7, loc=5.0, scale=2.138089935299395/sqrt(8))
        // = (3.21251208176379, 6.787487918236209)
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        let ci = confidence_interval(&s, 0.95).unwrap();
        assert!(close(ci.low, 3.21251208176379, 1e-9));
        assert!(close(ci.high, 6.787487918236209, 1e-9));
        assert!(close(ci.half_width_pct().unwrap(), 35.74975836472418, 1e-7));
        assert!(confidence_interval(&summarize(&[1.0]).unwrap(), 0.95).is_none());
    }

    #[test]
    fn welch_matches_scipy() {
        // scipy.stats.ttest_ind(b, a, equal_var=False) with
        // a = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4]
        // b = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4]
        // (Wikipedia's Welch example 1): t = 2.455356398286006, df = 24.988529290231416,
        // p = 0.021378001462866992.
        let a = summarize(&[
            27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7,
            21.4,
        ])
        .unwrap();
        let b = summarize(&[
            27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5,
            24.4,
        ])
        .unwrap();
        let w = welch(&a, &b).unwrap();
        assert!(close(w.t, 2.455356398286006, 1e-9), "{w:?}");
        assert!(close(w.df, 24.988529290231416, 1e-9), "{w:?}");
        assert!(close(w.p, 0.021378001462866992, 1e-9), "{w:?}");
        // Swapping the samples flips the sign only.
        let r = welch(&b, &a).unwrap();
        assert!(close(r.t, -w.t, 1e-12) && close(r.p, w.p, 1e-12));
    }

    #[test]
    fn welch_edge_cases() {
        let one = summarize(&[1.0]).unwrap();
        let two = summarize(&[1.0, 2.0]).unwrap();
        assert!(welch(&one, &two).is_none());
        let flat = summarize(&[5.0, 5.0, 5.0]).unwrap();
        assert_eq!(welch(&flat, &flat).unwrap().p, 1.0);
        let higher = summarize(&[6.0, 6.0]).unwrap();
        let w = welch(&flat, &higher).unwrap();
        assert_eq!(w.p, 0.0);
        assert!(w.t > 0.0);
    }

    #[test]
    fn kolmogorov_tail_matches_scipy() {
        // scipy.stats.kstwobign.sf(x)
        for (x, want) in [
            (0.3, 0.9999906941986655),
            (0.5, 0.9639452436648751),
            (1.0, 0.26999967167735456),
            (1.18, 0.1234538094297657),
            (1.36, 0.049485876755377876),
            (2.0, 0.0006709252557796953),
        ] {
            let got = kolmogorov_sf(x);
            assert!(close(got, want, 1e-9), "Q({x}) = {got}, want {want}");
        }
        assert_eq!(kolmogorov_sf(0.0), 1.0);
    }

    #[test]
    fn ks_same_distribution_is_zero() {
        let h = [(10.0, 5), (20.0, 10), (30.0, 5)];
        let k = ks_histograms(&h, &h).unwrap();
        assert_eq!(k.d, 0.0);
        assert_eq!(k.p, 1.0);
        // Proportional counts are the same distribution too.
        let double = [(30.0, 10), (10.0, 10), (20.0, 20)];
        assert_eq!(ks_histograms(&h, &double).unwrap().d, 0.0);
        assert!(ks_histograms(&h, &[]).is_none());
    }

    #[test]
    fn ks_shifted_distribution() {
        // a: 100 values in each of buckets 1..=4; b: the same shifted by one bucket.
        // CDFs at 1,2,3,4,5: a .25 .5 .75 1 1; b 0 .25 .5 .75 1 → D = 0.25 exactly.
        let a: Vec<(f64, u64)> = (1..=4).map(|x| (x as f64, 100)).collect();
        let b: Vec<(f64, u64)> = (2..=5).map(|x| (x as f64, 100)).collect();
        let k = ks_histograms(&a, &b).unwrap();
        assert_eq!(k.d, 0.25);
        assert_eq!((k.n_a, k.n_b), (400, 400));
        // nₑ = 200, λ = (√200 + 0.12 + 0.11/√200)·0.25 = 3.5674784495810004;
        // kstwobign.sf(λ) = 1.764342724617056e-11.
        assert!(close(k.p, 1.764342724617056e-11, 1e-18), "{k:?}");
        // Disjoint: D = 1.
        let far = [(100.0, 3)];
        assert_eq!(ks_histograms(&a, &far).unwrap().d, 1.0);
        // A small shift of a few samples is not significant.
        let c = [(1.0, 99), (2.0, 101), (3.0, 100), (4.0, 100)];
        let k = ks_histograms(&a, &c).unwrap();
        assert!(close(k.d, 0.0025, 1e-12));
        assert!(k.p > 0.99);
    }

    #[test]
    fn ks_in_units_judges_p_by_the_units() {
        // The shifted pair above (D = 0.25, 400 samples a side) taken as 40 frames a
        // side: nₑ = 20, λ = (√20 + 0.12 + 0.11/√20)·0.25 = 1.15415..., the same D.
        let a: Vec<(f64, u64)> = (1..=4).map(|x| (x as f64, 100)).collect();
        let b: Vec<(f64, u64)> = (2..=5).map(|x| (x as f64, 100)).collect();
        let k = ks_histograms_in_units(&a, &b, 40, 40).unwrap();
        assert_eq!((k.d, k.n_a, k.n_eff_a, k.n_eff_b), (0.25, 400, 40, 40));
        let sq = 20f64.sqrt();
        assert!(close(
            k.p,
            kolmogorov_sf((sq + 0.12 + 0.11 / sq) * 0.25),
            1e-15
        ));
        assert!(k.p > 0.1, "{k:?}");
        // Units beyond the samples, or none, are clamped: every sample its own at most,
        // one unit at least.
        let all = ks_histograms_in_units(&a, &b, u64::MAX, 10_000).unwrap();
        assert_eq!(all, ks_histograms(&a, &b).unwrap());
        assert_eq!((all.n_eff_a, all.n_eff_b), (400, 400));
        let one = ks_histograms_in_units(&a, &b, 0, 0).unwrap();
        assert_eq!((one.n_eff_a, one.n_eff_b), (1, 1));
        assert!(ks_histograms_in_units(&a, &[], 4, 4).is_none());
    }

    #[test]
    fn change_in_percent() {
        assert_eq!(change_pct(100.0, 80.0), Some(-20.0));
        assert_eq!(change_pct(0.0, 0.0), Some(0.0));
        assert_eq!(change_pct(0.0, 1.0), None);
        assert_eq!(change_pct(-2.0, -1.0), Some(50.0));
    }
}
