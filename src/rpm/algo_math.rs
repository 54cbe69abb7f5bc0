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

/// The draft's stability test (draft-ietf-ippm-responsiveness-08, section "Final
/// Algorithm"): the last `window` values exist and their standard deviation is less
/// than `tolerance` (a fraction: the draft's SDT of 5 % is 0.05) of the most recent one
/// (the draft's `current_average` / `current_responsiveness`), not of their mean.
pub fn is_stable(values: &[f64], window: usize, tolerance: f64) -> bool {
    let window = window.max(1);
    if values.len() < window {
        return false;
    }
    let tail = &values[values.len() - window..];
    let current = tail[tail.len() - 1];
    match std_dev(tail) {
        Some(sd) => current > 0.0 && sd < tolerance * current,
        None => false,
    }
}

/// Responsiveness in round trips per minute from the trimmed means (milliseconds) of
/// the foreign probes' parts and of the self probes, as
/// draft-ietf-ippm-responsiveness-08 gives it (section "Aggregating the Measurements",
/// "For the TLS-Enabled Case"):
///
/// ```text
/// Foreign_Responsiveness = 60000 / ((TM(tcp_f) + TM(tls_f) + TM(http_f)) / 3)
/// Loaded_Responsiveness  = 60000 / TM(http_l)
/// Responsiveness = (Foreign_Responsiveness + Loaded_Responsiveness) / 2
/// ```
///
/// That is the mean of the two RPMs, not 60000 over the mean of the two times (the
/// formula of drafts -02 to -04, which an earlier version of this file used); -09 keeps
/// -08's. Without TLS ("For the TCP-Only Case") the foreign time is the mean of the TCP
/// set-up and the GET alone. With only one kind measured (no load yet: no self probes)
/// that kind alone gives the figure.
pub fn responsiveness_rpm(foreign: Option<ForeignMeans>, self_ms: Option<f64>) -> Option<f64> {
    let rpm = |ms: f64| (ms > 0.0 && ms.is_finite()).then(|| 60_000.0 / ms);
    let foreign_rpm = foreign.and_then(|f| rpm(f.round_trip_ms()));
    let self_rpm = self_ms.and_then(rpm);
    match (foreign_rpm, self_rpm) {
        (Some(f), Some(s)) => Some((f + s) / 2.0),
        (one, None) | (None, one) => one,
    }
}

/// The trimmed means of a set of foreign probes' parts, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ForeignMeans {
    /// TCP connection set-up.
    pub tcp_ms: f64,
    /// TLS handshake, per round trip (`None`: no TLS, the draft's TCP-only case).
    pub tls_ms: Option<f64>,
    /// HTTP GET of the small object, request sent to last byte.
    pub http_ms: f64,
}

impl ForeignMeans {
    /// The foreign probe's round trip: the mean of its parts, each weighing the same.
    pub fn round_trip_ms(&self) -> f64 {
        match self.tls_ms {
            Some(tls) => (self.tcp_ms + tls + self.http_ms) / 3.0,
            None => (self.tcp_ms + self.http_ms) / 2.0,
        }
    }
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
    fn stability_needs_a_full_window_within_tolerance_of_the_current_value() {
        assert!(!is_stable(&[100.0, 100.0, 100.0], 4, 0.05));
        assert!(is_stable(&[50.0, 100.0, 101.0, 99.0, 100.0], 4, 0.05));
        // 90 and 110 around 100: sd 10 of a current 110, over the 5 % tolerance.
        assert!(!is_stable(&[90.0, 110.0, 90.0, 110.0], 4, 0.05));
        assert!(is_stable(&[90.0, 110.0, 90.0, 110.0], 4, 0.11));
        // The same spread judged against the current value, not the mean: sd 4.5 of
        // values around 100 is within 5 % of a current 100 but not of a current 89.
        assert!(is_stable(&[100.0, 109.0, 100.0, 100.0], 4, 0.05));
        assert!(!is_stable(&[100.0, 100.0, 100.0, 89.0], 4, 0.05));
        assert!(!is_stable(&[0.0; 4], 4, 0.05));
    }

    #[test]
    fn formula_is_the_mean_of_the_two_rpms() {
        // Foreign parts 10, 10, 10 ms (a 10 ms round trip), self 50 ms.
        let f = ForeignMeans {
            tcp_ms: 10.0,
            tls_ms: Some(10.0),
            http_ms: 10.0,
        };
        // By hand (-08): foreign 60000 / 10 = 6000, loaded 60000 / 50 = 1200, the
        // responsiveness (6000 + 1200) / 2 = 3600 RPM.
        assert_eq!(responsiveness_rpm(Some(f), Some(50.0)), Some(3600.0));
        // The earlier drafts' 60000 / (1/6 * 30 + 1/2 * 50) = 2000 is not -08's.
        assert_ne!(responsiveness_rpm(Some(f), Some(50.0)), Some(2000.0));
        assert_eq!(responsiveness_rpm(Some(f), None), Some(6000.0));
        assert_eq!(responsiveness_rpm(None, Some(50.0)), Some(1200.0));
        assert_eq!(responsiveness_rpm(None, None), None);
        assert_eq!(responsiveness_rpm(None, Some(0.0)), None);
        // TCP only: the foreign round trip is the mean of TCP and GET, (10 + 30) / 2.
        let tcp_only = ForeignMeans {
            tcp_ms: 10.0,
            tls_ms: None,
            http_ms: 30.0,
        };
        assert_eq!(responsiveness_rpm(Some(tcp_only), None), Some(3000.0));
    }
}
