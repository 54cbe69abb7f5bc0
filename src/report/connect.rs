//! `--connect-only` (TCP connection rate) figures and how they are reported.
//!
//! Pure: the engine (`engine::connect`) records, per client stream, the duration of
//! each `connect()` call (the 3-way handshake as the client sees it) and of the whole
//! connect + request + response + close transaction into [`ConnFigures`]. The end
//! summary is built in `build::connect`, the text lines in `text::connect`.

use super::{Interval, StreamExt};
use crate::latency::{Hist, LatencyStats};
use serde::{Deserialize, Serialize};

/// Connections of one stream (or several, merged) over some span.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConnFigures {
    /// `connect()` durations of completed connections.
    pub connect: Hist,
    /// connect + request + response + close durations of the same connections.
    pub transaction: Hist,
    /// Attempts that failed (refused, no answer within the timeout, reset).
    pub failed: u64,
}

impl ConnFigures {
    /// Completed connections.
    pub fn connections(&self) -> u64 {
        self.transaction.len()
    }

    pub fn merge(&mut self, other: &ConnFigures) {
        self.connect.merge(&other.connect);
        self.transaction.merge(&other.transaction);
        self.failed += other.failed;
    }

    pub fn clear(&mut self) {
        self.connect.clear();
        self.transaction.clear();
        self.failed = 0;
    }

    /// Write these figures into an interval row's netmeter extras.
    pub fn fill(&self, ext: &mut StreamExt) {
        ext.connections = Some(self.connections());
        ext.failed = Some(self.failed);
        ext.connect = self.connect.stats();
        ext.transaction = self.transaction.stats();
    }
}

/// A client stream's figures at the end of a connect-only test.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConnFinal {
    pub figures: ConnFigures,
    /// The most recent failure, for the summary.
    pub last_error: Option<String>,
}

/// `end.netmeter.connect_only` (client side).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ConnectOnlyEnd {
    pub streams: u32,
    /// Completed connections (connect, request, response, close).
    pub connections: u64,
    pub seconds: f64,
    pub connections_per_second: f64,
    /// Attempts that failed; not counted in `connections`.
    pub failed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Duration of the `connect()` call (3-way handshake), all streams.
    pub connect: LatencyStats,
    /// The full handshake-time histogram: `[upper bound µs, count]` per non-empty bucket.
    pub connect_histogram_us: Vec<(f64, u64)>,
    /// connect + request + response + close, all streams.
    pub transaction: LatencyStats,
}

/// `end.netmeter.connect_only_answered` (server side): connections the test's cookie
/// opened and the server answered.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct ConnectOnlyAnswered {
    pub connections: u64,
    pub seconds: f64,
    pub connections_per_second: f64,
}

pub(super) fn rate(n: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}

impl ConnectOnlyAnswered {
    pub fn new(connections: u64, seconds: f64) -> ConnectOnlyAnswered {
        ConnectOnlyAnswered {
            connections,
            seconds,
            connections_per_second: rate(connections, seconds),
        }
    }
}

/// The interval's `[SUM]` extras: the merged figures of every stream (client), or the
/// connections the server answered in the interval (server).
pub fn fill_sum(iv: &mut Interval, merged: Option<&ConnFigures>, answered: Option<u64>) {
    if let Some(m) = merged {
        m.fill(iv.sum.netmeter.get_or_insert_with(Default::default));
    } else if let Some(n) = answered {
        iv.sum
            .netmeter
            .get_or_insert_with(Default::default)
            .connections = Some(n);
    }
}

#[cfg(test)]
pub(super) fn figures(connect_us: &[u64], failed: u64) -> ConnFigures {
    let mut f = ConnFigures::default();
    for &us in connect_us {
        f.connect.record_ns(us * 1000);
        f.transaction.record_ns(us * 3000);
    }
    f.failed = failed;
    f
}
