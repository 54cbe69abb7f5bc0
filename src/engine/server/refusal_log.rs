//! Refusals, aggregated: the first [`BURST`] refusals of a source (for one reason) in a
//! [`PERIOD`] are logged and audited as they happen, so that an occasional refusal
//! reads as before; the next ones in the period are only counted, and one summary line
//! per source and reason says how many there were once the period is over. One source
//! refused as fast as it can connect then writes at most `BURST + 1` log lines and as
//! many audit lines a minute instead of thousands a second; the metrics still count
//! every refusal.
//!
//! Pure: `now` comes in, what to write goes out. The table holds at most
//! [`MAX_SOURCES`] sources; refusals from further sources share one "other sources"
//! entry until the table empties again, so its memory is bounded whatever the peers do.

use super::policy::Reason;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The period over which a source's refusals are counted together.
pub const PERIOD: Duration = Duration::from_secs(60);
/// Refusals of one source for one reason written one by one in a period.
pub const BURST: u32 = 10;
/// Sources tracked one by one.
pub const MAX_SOURCES: usize = 1024;

/// Whose refusals a line counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    Addr(IpAddr),
    /// Every source beyond [`MAX_SOURCES`].
    Others,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Addr(ip) => write!(f, "{ip}"),
            Source::Others => f.write_str("other sources"),
        }
    }
}

/// What to do with one refusal's own lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Log and audit it as usual.
    Write,
    /// Only count it: a later [`Summary`] stands for it.
    Hold,
}

/// The refusals held back from one source for one reason since `since`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub source: Source,
    pub reason: Reason,
    pub count: u64,
    pub since: Instant,
}

impl Summary {
    /// The server log's sentence for it.
    pub fn sentence(&self) -> String {
        format!(
            "refused {} more connection(s) from {} ({}) in {} s after the {} logged; past {} a source's refusals are counted, not logged, for {} s",
            self.count,
            self.source,
            self.reason.label(),
            PERIOD.as_secs(),
            BURST,
            BURST,
            PERIOD.as_secs()
        )
    }
}

#[derive(Debug)]
struct Window {
    since: Instant,
    written: u32,
    held: u64,
}

/// The table of open periods.
#[derive(Debug)]
pub struct RefusalLimiter {
    period: Duration,
    burst: u32,
    max_sources: usize,
    open: HashMap<(Source, Reason), Window>,
}

impl Default for RefusalLimiter {
    fn default() -> Self {
        RefusalLimiter::new(PERIOD, BURST, MAX_SOURCES)
    }
}

impl RefusalLimiter {
    pub fn new(period: Duration, burst: u32, max_sources: usize) -> RefusalLimiter {
        RefusalLimiter {
            period,
            burst: burst.max(1),
            max_sources,
            open: HashMap::new(),
        }
    }

    /// A refusal of `ip` for `reason` at `now`: whether to write its lines, and the
    /// summary of the period it closes, if that period held any back (write it first).
    pub fn note(&mut self, ip: IpAddr, reason: Reason, now: Instant) -> (Verdict, Option<Summary>) {
        let mut source = Source::Addr(ip);
        if !self.open.contains_key(&(source, reason)) && self.open.len() >= self.max_sources {
            source = Source::Others;
        }
        let (period, burst) = (self.period, self.burst);
        let fresh = Window {
            since: now,
            written: 1,
            held: 0,
        };
        let Some(w) = self.open.get_mut(&(source, reason)) else {
            self.open.insert((source, reason), fresh);
            return (Verdict::Write, None);
        };
        if now.saturating_duration_since(w.since) < period {
            if w.written < burst {
                w.written += 1;
                return (Verdict::Write, None);
            }
            w.held += 1;
            return (Verdict::Hold, None);
        }
        let closed = (w.held > 0).then_some(Summary {
            source,
            reason,
            count: w.held,
            since: w.since,
        });
        *w = fresh;
        (Verdict::Write, closed)
    }

    /// The periods over at `now`: their summaries (those that held refusals back), and
    /// the table forgets them.
    pub fn due(&mut self, now: Instant) -> Vec<Summary> {
        let period = self.period;
        self.take(|w| now.saturating_duration_since(w.since) >= period)
    }

    /// Every period still open, over or not (the server is stopping).
    pub fn drain(&mut self) -> Vec<Summary> {
        self.take(|_| true)
    }

    fn take(&mut self, over: impl Fn(&Window) -> bool) -> Vec<Summary> {
        let mut out = Vec::new();
        self.open.retain(|&(source, reason), w| {
            if !over(w) {
                return true;
            }
            if w.held > 0 {
                out.push(Summary {
                    source,
                    reason,
                    count: w.held,
                    since: w.since,
                });
            }
            false
        });
        out.sort_by_key(|s| s.since);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn a_flood_writes_one_line_then_one_summary_per_period() {
        let t0 = ManualClock::at_unix(1_700_000_000).now();
        let mut l = RefusalLimiter::new(Duration::from_secs(60), 10, 16);
        let mut written = 0;
        let mut summaries = Vec::new();
        // 100 refusals a second for 150 s.
        for ms in (0..150_000).step_by(10) {
            let now = t0 + Duration::from_millis(ms);
            let (v, s) = l.note(ip(2), Reason::Address, now);
            written += (v == Verdict::Write) as u32;
            summaries.extend(s);
            summaries.extend(l.due(now));
        }
        summaries.extend(l.drain());
        // Ten written from 0, 60 and 120 s; each period's rest in one summary.
        assert_eq!(written, 30);
        let counts: Vec<u64> = summaries.iter().map(|s| s.count).collect();
        assert_eq!(counts, [5990, 5990, 2990]);
        assert_eq!(u64::from(written) + counts.iter().sum::<u64>(), 15_000);
        assert!(summaries.iter().all(|s| s.source == Source::Addr(ip(2))));
    }

    #[test]
    fn sources_and_reasons_count_apart() {
        let t0 = ManualClock::at_unix(1_700_000_000).now();
        let mut l = RefusalLimiter::new(PERIOD, 1, MAX_SOURCES);
        assert_eq!(l.note(ip(2), Reason::Address, t0).0, Verdict::Write);
        assert_eq!(l.note(ip(3), Reason::Address, t0).0, Verdict::Write);
        assert_eq!(l.note(ip(2), Reason::Rate, t0).0, Verdict::Write);
        assert_eq!(l.note(ip(2), Reason::Address, t0).0, Verdict::Hold);
        // Nothing is over yet; a refusal alone in its period leaves no summary.
        assert!(l.due(t0 + Duration::from_secs(59)).is_empty());
        let s = l.due(t0 + PERIOD);
        assert_eq!(s.len(), 1);
        assert_eq!(
            (s[0].source, s[0].reason, s[0].count),
            (Source::Addr(ip(2)), Reason::Address, 1)
        );
        assert!(
            s[0].sentence()
                .starts_with("refused 1 more connection(s) from 127.0.0.2 (address)")
        );
        assert!(l.drain().is_empty());
        // Forgotten: the next refusal is written again.
        assert_eq!(
            l.note(ip(2), Reason::Address, t0 + PERIOD).0,
            Verdict::Write
        );
    }

    #[test]
    fn sources_beyond_the_table_share_one_entry() {
        let t0 = ManualClock::at_unix(1_700_000_000).now();
        let mut l = RefusalLimiter::new(PERIOD, 1, 4);
        let mut written = 0;
        for i in 0..=255u8 {
            for _ in 0..3 {
                written += (l.note(ip(i), Reason::Rate, t0).0 == Verdict::Write) as u32;
            }
        }
        // Four sources on their own, then all the others together: five lines.
        assert_eq!(written, 5);
        assert!(l.open.len() <= 5);
        let s = l.drain();
        let others = s.iter().find(|s| s.source == Source::Others).unwrap();
        assert_eq!(others.count, 252 * 3 - 1);
        assert_eq!(s.iter().map(|s| s.count).sum::<u64>() + 5, 256 * 3);
    }

    #[test]
    fn an_occasional_refusal_is_always_written() {
        let t0 = ManualClock::at_unix(1_700_000_000).now();
        let mut l = RefusalLimiter::default();
        for i in 0..BURST {
            let at = t0 + Duration::from_secs(u64::from(i));
            assert_eq!(l.note(ip(2), Reason::Auth, at), (Verdict::Write, None));
        }
        assert_eq!(l.note(ip(2), Reason::Auth, t0).0, Verdict::Hold);
        assert_eq!(l.drain().len(), 1);
    }
}
