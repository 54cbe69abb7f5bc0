//! The `--connect-only` end summary from the client's streams.

use super::LocalFinal;
use crate::report::connect::{ConnFigures, ConnectOnlyEnd, rate};

/// The client's end summary over its streams (`None` unless it ran a connect-only test).
pub fn end_of(locals: &[LocalFinal]) -> Option<ConnectOnlyEnd> {
    // Checked first: the merged figures hold two histograms (~250 KB), which every other
    // test's end summary would build for nothing.
    if locals.iter().all(|l| l.conn.is_none()) {
        return None;
    }
    let mut all = ConnFigures::default();
    let mut last_error = None;
    let mut streams = 0;
    for c in locals.iter().filter_map(|l| l.conn.as_ref()) {
        all.merge(&c.figures);
        if c.last_error.is_some() {
            last_error.clone_from(&c.last_error);
        }
        streams += 1;
    }
    if streams == 0 {
        return None;
    }
    let seconds = locals
        .iter()
        .filter(|l| l.conn.is_some())
        .map(|l| l.seconds)
        .fold(0.0, f64::max);
    let connections = all.connections();
    Some(ConnectOnlyEnd {
        streams,
        connections,
        seconds,
        connections_per_second: rate(connections, seconds),
        failed: all.failed,
        last_error,
        connect: all.connect.stats().unwrap_or_default(),
        connect_histogram_us: all.connect.buckets_us(),
        transaction: all.transaction.stats().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::connect::{ConnFinal, figures};

    #[test]
    fn end_merges_streams_and_rates_use_the_longest_stream() {
        let locals = [
            LocalFinal {
                seconds: 2.0,
                conn: Some(ConnFinal {
                    figures: figures(&[30, 40, 50], 1),
                    last_error: Some("connection refused".into()),
                }),
                ..LocalFinal::default()
            },
            LocalFinal {
                seconds: 1.9,
                conn: Some(ConnFinal {
                    figures: figures(&[60], 0),
                    last_error: None,
                }),
                ..LocalFinal::default()
            },
        ];
        let e = end_of(&locals).unwrap();
        assert_eq!((e.streams, e.connections, e.failed), (2, 4, 1));
        assert_eq!(e.seconds, 2.0);
        assert_eq!(e.connections_per_second, 2.0);
        assert_eq!(e.connect.count, 4);
        let hist: u64 = e.connect_histogram_us.iter().map(|b| b.1).sum();
        assert_eq!(hist, 4);
        assert!((e.transaction.max_ms - 0.18).abs() < 0.001);
        assert_eq!(e.last_error.as_deref(), Some("connection refused"));
        assert!(end_of(&[LocalFinal::default()]).is_none());
    }
}
