//! The messages of multicast `--receivers` (issue 23 item 3): a netmeter client asks a
//! netmeter server to join a group for a test ([`JoinRequest`]), the server answers
//! when it joined or why not, and at the end sends what it received from the client
//! ([`ReceiverFigures`]), both as a [`JoinAnswer`]. Typed values only: what a request
//! may ask is judged by the server (`engine::multicast::receivers::server`), and the
//! figures a peer sends are checked by [`ReceiverFigures::checked`] before use.

use serde::{Deserialize, Serialize};

/// The most interval rows a receiver sends back (an hour of 1 s rows); a peer that
/// sends more is misbehaving.
pub const MAX_FIGURE_ROWS: usize = 3600;
/// The longest refusal or error sentence kept from a peer, in bytes.
pub const MAX_REASON_LEN: usize = 512;

/// "Join this group for this long, and tell me what you receive from me."
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct JoinRequest {
    /// The group address as text (`239.1.1.1`, `ff15::77`), without `%DEV`.
    pub group: String,
    /// The receiver's interface to join on (the `%DEV` of `--receivers HOST%DEV`);
    /// none: the route's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<String>,
    /// `-H SOURCE` at the sender: a source-specific join of (SOURCE, GROUP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The UDP port the datagrams go to.
    pub port: u16,
    /// How long the sender sends, milliseconds (the server adds its grace).
    pub duration_ms: u64,
    /// The sender's `-i`, milliseconds; 0: no interval rows.
    #[serde(default)]
    pub interval_ms: u64,
    /// `--trip-times`: the figures carry the one-way delay.
    #[serde(default)]
    pub trip_times: bool,
    /// The address the datagrams come from (the sender's socket's, which may differ
    /// from its control connection's: another family, another interface); none: the
    /// control connection's peer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<String>,
    /// Send each interval's row as it closes (`{"row": ...}`), not only at the end.
    /// Additive: an older server ignores it (its join answer lacks `live`), an older
    /// client never sets it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub live: bool,
}

/// A receiver's answer: `joined`, or `error` (a refusal or a failure, one sentence),
/// or at the end `figures`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct JoinAnswer {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub joined: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub figures: Option<ReceiverFigures>,
    /// In the join answer: this server will send live rows (the request asked).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub live: bool,
    /// During the test: one interval's row, as it closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row: Option<LiveRow>,
}

/// One interval's row sent live: `k`, the interval's number from 0 (the `k`-th row
/// this receiver closed for the sender), and its figures.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct LiveRow {
    pub k: u64,
    pub row: FigureRow,
}

impl LiveRow {
    /// The row if a sane receiver could have sent it: `k` below [`MAX_FIGURE_ROWS`],
    /// times finite and in order.
    pub fn checked(self) -> Option<LiveRow> {
        (self.k < MAX_FIGURE_ROWS as u64 && self.row.plausible()).then_some(self)
    }
}

/// One span's figures at a receiver (an interval, or the whole test).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct FigureRow {
    /// Seconds since the receiver's first datagram from the sender.
    pub start_s: f64,
    pub end_s: f64,
    pub bytes: u64,
    /// Datagrams received (distinct).
    pub packets: u64,
    pub lost: u64,
    pub out_of_order: u64,
    /// RFC 3550 jitter at the span's end, seconds.
    pub jitter_s: f64,
}

/// One-way delay at a receiver (its wall clock minus the sender's timestamps), seconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct OwdFigures {
    pub min_s: f64,
    pub mean_s: f64,
    pub max_s: f64,
    pub count: u64,
}

/// What a receiver got from the sender over the whole test.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ReceiverFigures {
    pub sum: FigureRow,
    /// With `--trip-times` and at least one datagram.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owd: Option<OwdFigures>,
    #[serde(default)]
    pub intervals: Vec<FigureRow>,
}

impl FigureRow {
    fn plausible(&self) -> bool {
        [self.start_s, self.end_s, self.jitter_s]
            .iter()
            .all(|v| v.is_finite() && *v >= 0.0)
            && self.end_s >= self.start_s
    }
}

impl ReceiverFigures {
    /// The figures if a sane receiver could have sent them: at most
    /// [`MAX_FIGURE_ROWS`] rows, times and jitter finite and not negative, spans in
    /// order, the one-way delay finite with min ≤ mean ≤ max. Otherwise why not.
    pub fn checked(self) -> Result<ReceiverFigures, String> {
        if self.intervals.len() > MAX_FIGURE_ROWS {
            return Err(format!(
                "its figures carry {} interval rows (at most {MAX_FIGURE_ROWS})",
                self.intervals.len()
            ));
        }
        if !self.sum.plausible() || !self.intervals.iter().all(FigureRow::plausible) {
            return Err("its figures hold a negative or non-finite time".into());
        }
        if let Some(o) = self.owd {
            let finite = [o.min_s, o.mean_s, o.max_s].iter().all(|v| v.is_finite());
            if !finite || o.min_s > o.mean_s || o.mean_s > o.max_s {
                return Err("its one-way delay is not a min/mean/max".into());
            }
        }
        Ok(self)
    }
}

/// A peer's sentence, cut to [`MAX_REASON_LEN`] bytes (on a character boundary) and
/// stripped of control characters, fit to print.
pub fn printable_reason(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars().filter(|c| !c.is_control()) {
        if out.len() + c.len_utf8() > MAX_REASON_LEN {
            break;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_round_trips_and_omits_what_is_not_asked() {
        let r = JoinRequest {
            group: "232.1.1.1".into(),
            dev: Some("eth0".into()),
            source: Some("10.0.0.1".into()),
            port: 5201,
            duration_ms: 3000,
            interval_ms: 1000,
            trip_times: true,
            sender: Some("10.0.0.1".into()),
            live: true,
        };
        let s = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<JoinRequest>(&s).unwrap(), r);
        let bare: JoinRequest =
            serde_json::from_str(r#"{"group":"239.1.1.1","port":5201,"duration_ms":1000}"#)
                .unwrap();
        assert_eq!(bare.source, None);
        assert!(!bare.trip_times);
        let joined = serde_json::to_string(&JoinAnswer {
            joined: true,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(joined, r#"{"joined":true}"#);
        // An older peer's messages: no live rows asked, none promised.
        assert!(!bare.live);
        let old: JoinAnswer = serde_json::from_str(r#"{"joined":true}"#).unwrap();
        assert!(!old.live && old.row.is_none());
        let live = JoinAnswer {
            row: Some(LiveRow {
                k: 2,
                row: FigureRow::default(),
            }),
            ..Default::default()
        };
        let s = serde_json::to_string(&live).unwrap();
        assert_eq!(serde_json::from_str::<JoinAnswer>(&s).unwrap(), live);
        assert!(live.row.unwrap().checked().is_some());
        let far = LiveRow {
            k: MAX_FIGURE_ROWS as u64,
            row: FigureRow::default(),
        };
        assert!(far.checked().is_none());
    }

    #[test]
    fn implausible_figures_are_refused() {
        let ok = ReceiverFigures {
            sum: FigureRow {
                end_s: 2.0,
                bytes: 10,
                packets: 1,
                ..Default::default()
            },
            owd: Some(OwdFigures {
                min_s: 0.001,
                mean_s: 0.002,
                max_s: 0.003,
                count: 1,
            }),
            intervals: vec![],
        };
        assert!(ok.clone().checked().is_ok());
        let mut many = ok.clone();
        many.intervals = vec![FigureRow::default(); MAX_FIGURE_ROWS + 1];
        assert!(many.checked().unwrap_err().contains("3601 interval rows"));
        let mut backwards = ok.clone();
        backwards.sum.start_s = 3.0;
        assert!(backwards.checked().is_err());
        let mut nan = ok.clone();
        nan.intervals.push(FigureRow {
            jitter_s: f64::NAN,
            ..Default::default()
        });
        assert!(nan.checked().is_err());
        let mut owd = ok;
        owd.owd = Some(OwdFigures {
            min_s: 0.004,
            mean_s: 0.002,
            max_s: 0.003,
            count: 1,
        });
        assert!(owd.checked().is_err());
    }

    #[test]
    fn reasons_are_cut_and_cleaned() {
        assert_eq!(printable_reason("no\nroute"), "noroute");
        let long = "é".repeat(MAX_REASON_LEN);
        let cut = printable_reason(&long);
        assert!(cut.len() <= MAX_REASON_LEN && cut.chars().all(|c| c == 'é'));
    }
}
