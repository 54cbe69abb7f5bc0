//! The arithmetic of the responsiveness draft (draft-ietf-ippm-responsiveness), apart
//! from the state machine that uses it: the trimmed mean of probe times, the moving
//! average over the last intervals, the stability test on the standard deviation and
//! the responsiveness formula. Pure functions on plain numbers.

/// The mean of the values left after the slowest ones are dropped: the lowest
/// `keep_pct` percent are kept (the draft's TMP: 95 keeps the lowest 95 %, dropping
/// the top 5 %), at least one value. `None` for no (finite) values.
pub fn trimmed_mean(values: &[f64], keep_pct: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let keep_pct = keep_pct.clamp(0.0, 100.0);
    // ceil: with 10 samples and 95 %, 9.5 rounds up to 10 kept (nothing dropped until a
    // whole sample is over the line), as "drop the top 5 %" reads for small counts.
    let keep = ((v.len() as f64 * keep_pct / 100.0).ceil() as usize).clamp(1, v.len());
    let kept = &v[..keep];
    Some(kept.iter().sum::<f64>() / kept.len() as f64)
}

/// The mean of the last `window` values (fewer if there are fewer). `None` when empty.
pub fn moving_average(values: &[f64], window: usize) -> Option<f64> {
    let window = window.max(1);
    let tail = &values[values.len().saturating_sub(window)..];
    (!tail.is_empty()).then(|| tail.iter().sum::<f64>() / tail.len() as f64)
}

/// The population standard deviation. `None` when empty.
pub fn std_dev(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    Some((values.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt())
}

/// The draft's stability test: the last `window` moving averages exist and their
/// standard deviation is within `tolerance` (a fraction: the draft's SDT of 5 % is
/// 0.05) of their mean.
pub fn is_stable(moving_averages: &[f64], window: usize, tolerance: f64) -> bool {
    let window = window.max(1);
    if moving_averages.len() < window {
        return false;
    }
    let tail = &moving_averages[moving_averages.len() - window..];
    let mean = tail.iter().sum::<f64>() / tail.len() as f64;
    match std_dev(tail) {
        Some(sd) => mean > 0.0 && sd <= tolerance * mean,
        None => false,
    }
}

/// Responsiveness in round trips per minute from the trimmed means (milliseconds) of
/// the foreign probes' three parts and of the self probes, as
/// draft-ietf-ippm-responsiveness gives it (section "Aggregating the Measurements",
/// unchanged from -02 to the -09 that issue 25 names):
///
/// ```text
/// RPM = 60000 / ( 1/6 * (TM(tcp_f) + TM(tls_f) + TM(http_f)) + 1/2 * TM(http_s) )
/// ```
///
/// That is 60000 over the mean of two times, the foreign probe's round trip (the mean
/// of its three parts) and the self probe's; it is not the mean of a foreign RPM and a
/// self RPM (which weighs the faster kind more: see the unit test). netmeter computes
/// the draft's figure and reports the foreign and self RPMs beside it. With only one
/// kind measured (no load yet: no self probes) that kind alone gives the figure.
pub fn responsiveness_rpm(foreign: Option<ForeignMeans>, self_ms: Option<f64>) -> Option<f64> {
    let foreign_ms = foreign.map(|f| (f.tcp_ms + f.tls_ms + f.http_ms) / 3.0);
    let ms = match (foreign_ms, self_ms) {
        (Some(f), Some(s)) => (f + s) / 2.0,
        (Some(f), None) => f,
        (None, Some(s)) => s,
        (None, None) => return None,
    };
    (ms > 0.0 && ms.is_finite()).then(|| 60_000.0 / ms)
}

/// The trimmed means of a set of foreign probes' three parts, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ForeignMeans {
    /// TCP connection set-up.
    pub tcp_ms: f64,
    /// TLS handshake.
    pub tls_ms: f64,
    /// HTTP GET of the small object, request sent to last byte.
    pub http_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimmed_mean_drops_the_slowest_five_percent() {
        // 20 samples: 19 of 10 ms and one of 1000 ms; the top 5 % is the one outlier.
        let mut v = vec![10.0; 19];
        v.push(1000.0);
        assert_eq!(trimmed_mean(&v, 95.0), Some(10.0));
        // 10 samples: 5 % is half a sample, nothing is dropped.
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(trimmed_mean(&v, 95.0), Some(5.5));
        assert_eq!(trimmed_mean(&[], 95.0), None);
        assert_eq!(trimmed_mean(&[f64::NAN], 95.0), None);
    }

    #[test]
    fn moving_average_takes_the_tail() {
        assert_eq!(moving_average(&[1.0, 2.0, 3.0, 4.0, 5.0], 4), Some(3.5));
        assert_eq!(moving_average(&[2.0], 4), Some(2.0));
        assert_eq!(moving_average(&[], 4), None);
    }

    #[test]
    fn stability_needs_a_full_window_within_tolerance() {
        assert!(!is_stable(&[100.0, 100.0, 100.0], 4, 0.05));
        assert!(is_stable(&[50.0, 100.0, 101.0, 99.0, 100.0], 4, 0.05));
        // 90 and 110 around 100: sd 10 % of the mean, over the 5 % tolerance.
        assert!(!is_stable(&[90.0, 110.0, 90.0, 110.0], 4, 0.05));
        assert!(is_stable(&[90.0, 110.0, 90.0, 110.0], 4, 0.11));
        assert!(!is_stable(&[0.0; 4], 4, 0.05));
    }

    #[test]
    fn formula_weighs_times_not_rpms() {
        // Foreign parts 10, 10, 10 ms (a 10 ms round trip each), self 50 ms.
        let f = ForeignMeans {
            tcp_ms: 10.0,
            tls_ms: 10.0,
            http_ms: 10.0,
        };
        // By hand: 1/6 * 30 + 1/2 * 50 = 5 + 25 = 30 ms; 60000 / 30 = 2000 RPM.
        assert_eq!(responsiveness_rpm(Some(f), Some(50.0)), Some(2000.0));
        // The mean of the two RPMs would be (6000 + 1200) / 2 = 3600: not the draft's.
        assert_ne!(responsiveness_rpm(Some(f), Some(50.0)), Some(3600.0));
        assert_eq!(responsiveness_rpm(Some(f), None), Some(6000.0));
        assert_eq!(responsiveness_rpm(None, Some(50.0)), Some(1200.0));
        assert_eq!(responsiveness_rpm(None, None), None);
        assert_eq!(responsiveness_rpm(None, Some(0.0)), None);
    }
}
