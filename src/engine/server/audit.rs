//! `--audit-log FILE`: one JSON line per test the server saw — who, when, what they
//! asked for, what became of it, how many bytes moved. docs/server.md describes the
//! fields; the server's text log stays for people, this file is for programs.
//!
//! A "test" is a connection that got as far as a decision: refused at the door
//! (`--allow`/`--deny`, `--max-conn-rate`), refused on its parameters or credential, or
//! run (to the end or to an error). A connection that never sent a cookie or its
//! parameters is not a test and gets no line (the verbose server log names it).

use super::policy::{Reason, Refusal};
use super::refusal_log::Summary;
use crate::engine::TestError;
use crate::engine::clock::civil_from_days;
use crate::spec::{Direction, EndCondition, Protocol, TestSpec};
use serde::Serialize;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// What the session learnt about one test, filled in as the conversation goes.
#[derive(Debug)]
pub struct Entry {
    pub started: Instant,
    pub wall: SystemTime,
    pub peer: SocketAddr,
    /// The authenticated user (`--authorized-users-path`).
    pub user: Option<String>,
    /// What the client asked for, once its parameters arrived.
    pub test: Option<TestParams>,
    /// Set where the policy (or the credential check) said no.
    pub refused: Option<Refusal>,
    /// The refusal is counted into its source's next summary line (`refusal_log`)
    /// instead of being written on its own.
    pub held: bool,
    /// This server's own counts: bytes it sent and received on the data streams.
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

/// How a test ended, for the audit line and the metrics.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Ok,
    Refused(Reason, String),
    Error(String),
}

impl Outcome {
    /// How a session's result reads in the audit log and the metrics: `ran` is what
    /// `Session::run` returned, `refused` the refusal it recorded. `None` for a
    /// connection that never became a test.
    pub fn of(ran: &Result<bool, TestError>, refused: Option<Refusal>) -> Option<Outcome> {
        Some(match (ran, refused) {
            (_, Some(r)) => Outcome::Refused(r.reason, r.message),
            (Ok(true), None) => Outcome::Ok,
            (Ok(false), None) => return None,
            // Parameters this server cannot run (`TestSpec::from_params`).
            (Err(TestError::Refused(e)), None) => {
                Outcome::Refused(Reason::Params, e.message.clone())
            }
            (Err(e), None) => Outcome::Error(match e.stopped() {
                Some(why) => format!("stopped: {why}"),
                None => format!("{e:#}"),
            }),
        })
    }
}

/// The test parameters worth auditing, in the client's flag terms.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestParams {
    /// "tcp" or "udp".
    pub protocol: &'static str,
    /// -P.
    pub parallel: u32,
    /// -t in seconds (0 = until interrupted); absent for -n / -k tests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_s: Option<f64>,
    /// -n.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// -k.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocks: Option<u64>,
    /// -b per stream, bits/s (0 = unlimited).
    pub bitrate_bps: u64,
    /// "upload" (the client sends), "reverse" (-R) or "bidir".
    pub direction: &'static str,
}

impl TestParams {
    pub fn of(spec: &TestSpec) -> TestParams {
        let (time_s, bytes, blocks) = match spec.end {
            EndCondition::Time(t) => (Some(t), None, None),
            EndCondition::Bytes(n) => (None, Some(n), None),
            EndCondition::Blocks(n) => (None, None, Some(n)),
        };
        TestParams {
            protocol: match spec.protocol {
                Protocol::Tcp => "tcp",
                Protocol::Udp => "udp",
            },
            parallel: spec.parallel,
            time_s,
            bytes,
            blocks,
            bitrate_bps: spec.rate_bps,
            direction: match spec.direction {
                Direction::Upload => "upload",
                Direction::Reverse => "reverse",
                Direction::Bidir => "bidir",
            },
        }
    }
}

/// One line of the audit log, as serialized.
#[derive(Serialize)]
struct Line<'a> {
    /// UTC, RFC 3339 with milliseconds.
    time: String,
    peer: String,
    user: Option<&'a str>,
    test: Option<&'a TestParams>,
    /// "ok", "refused" or "error".
    result: &'static str,
    /// With "refused": the policy's label (`policy::Reason::label`).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    /// With "refused" or "error": the sentence the server logged.
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    bytes_sent: u64,
    bytes_received: u64,
    duration_s: f64,
    /// On a summary of refusals held back (`refusal_log`): how many this line stands
    /// for, from `peer` (an address without a port) over `duration_s` before `time`.
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<u64>,
}

impl Entry {
    /// A test from `peer` begun at monotonic `now`, wall time `wall` (from the server's
    /// clock).
    pub fn begun(peer: SocketAddr, now: Instant, wall: SystemTime) -> Entry {
        Entry {
            started: now,
            wall,
            peer,
            user: None,
            test: None,
            refused: None,
            held: false,
            bytes_sent: 0,
            bytes_received: 0,
        }
    }

    /// The JSON line (without its newline) for this test, ended at `now`.
    pub fn line(&self, outcome: &Outcome, now: Instant) -> String {
        let (result, reason, message) = match outcome {
            Outcome::Ok => ("ok", None, None),
            Outcome::Refused(r, m) => ("refused", Some(r.label()), Some(m.as_str())),
            Outcome::Error(m) => ("error", None, Some(m.as_str())),
        };
        let line = Line {
            time: rfc3339_ms(self.wall),
            peer: self.peer.to_string(),
            user: self.user.as_deref(),
            test: self.test.as_ref(),
            result,
            reason,
            message,
            bytes_sent: self.bytes_sent,
            bytes_received: self.bytes_received,
            // Milliseconds are plenty for an audit trail.
            duration_s: (now.saturating_duration_since(self.started).as_secs_f64() * 1000.0)
                .round()
                / 1000.0,
            count: None,
        };
        // Serializing plain strings and numbers cannot fail; keep the line anyway.
        serde_json::to_string(&line).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// The audit line standing for the refusals `s` held back, written at wall time `wall`
/// (monotonic `now`).
pub fn summary_line(s: &Summary, wall: SystemTime, now: Instant) -> String {
    let message = s.sentence();
    let line = Line {
        time: rfc3339_ms(wall),
        peer: s.source.to_string(),
        user: None,
        test: None,
        result: "refused",
        reason: Some(s.reason.label()),
        message: Some(&message),
        bytes_sent: 0,
        bytes_received: 0,
        duration_s: (now.saturating_duration_since(s.since).as_secs_f64() * 1000.0).round()
            / 1000.0,
        count: Some(s.count),
    };
    serde_json::to_string(&line).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// `2026-11-23T03:40:01.123Z`.
fn rfc3339_ms(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (y, m, day) = civil_from_days(secs / 86400);
    let rem = secs % 86400;
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// `--audit-log-max-size`/`--audit-log-keep`: when a line would take the file past
/// `max_bytes`, `FILE` becomes `FILE.1` (`FILE.1` becomes `FILE.2`, ..., up to `keep`;
/// the oldest is removed) and a new `FILE` starts. `keep` 0: the file starts over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    pub max_bytes: u64,
    pub keep: u32,
}

impl Rotation {
    /// The default bound: 64 MiB per file, three old files kept (256 MiB in all).
    pub const DEFAULT: Rotation = Rotation {
        max_bytes: 64 << 20,
        keep: 3,
    };

    /// Whether a line of `line_bytes` (with its newline) must go to a new file, the
    /// current one holding `written` bytes. A line longer than the bound still goes
    /// whole, into a file of its own.
    pub fn due(&self, written: u64, line_bytes: u64) -> bool {
        written > 0 && written.saturating_add(line_bytes) > self.max_bytes
    }
}

/// `--audit-log FILE` with its bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `-` = stdout.
    pub path: std::path::PathBuf,
    /// `None`: the file grows without bound (`--audit-log-max-size 0`).
    pub rotation: Option<Rotation>,
}

struct Open {
    out: Box<dyn Write + Send>,
    /// Bytes in the current file (its size when opened, then what was appended).
    written: u64,
}

/// Where the lines go: a file opened for appending (rotated by size, reopened on
/// SIGHUP), or stdout (`-`).
pub struct AuditLog {
    target: Target,
    open: Mutex<Open>,
}

impl AuditLog {
    /// Open the target (`-` = stdout) for appending, creating it.
    pub fn open(target: &Target) -> std::io::Result<AuditLog> {
        Ok(AuditLog {
            open: Mutex::new(Self::open_file(&target.path)?),
            target: target.clone(),
        })
    }

    fn to_stdout(path: &Path) -> bool {
        path.as_os_str() == "-"
    }

    fn open_file(path: &Path) -> std::io::Result<Open> {
        if Self::to_stdout(path) {
            return Ok(Open {
                out: Box::new(std::io::stdout()),
                written: 0,
            });
        }
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let written = f.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Open {
            out: Box::new(f),
            written,
        })
    }

    /// The file rotated away and the old ones shifted: `FILE.{keep-1}` → `FILE.{keep}`
    /// ... `FILE` → `FILE.1` (a missing one skipped), then a new `FILE`.
    fn rotate(&self, rotation: Rotation) -> std::io::Result<Open> {
        let path = &self.target.path;
        let numbered = |n: u32| {
            let mut p = path.clone().into_os_string();
            p.push(format!(".{n}"));
            std::path::PathBuf::from(p)
        };
        if rotation.keep == 0 {
            std::fs::remove_file(path)?;
        } else {
            for n in (1..rotation.keep).rev() {
                match std::fs::rename(numbered(n), numbered(n + 1)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
            std::fs::rename(path, numbered(1))?;
        }
        Self::open_file(path)
    }

    /// Open the file again by its name (SIGHUP: an outside rotation, logrotate's
    /// `postrotate`, moved it away). Stdout stays.
    pub fn reopen(&self) -> std::io::Result<()> {
        let fresh = Self::open_file(&self.target.path)?;
        let mut open = self
            .open
            .lock()
            .map_err(|_| std::io::Error::other("audit log lock poisoned"))?;
        *open = fresh;
        Ok(())
    }

    /// Append one line, written whole with its newline in one call, and flushed, so
    /// that a reader following the file never sees half a line. The file is rotated
    /// first when the line would take it past its bound.
    pub fn write(&self, line: &str) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        let mut open = self
            .open
            .lock()
            .map_err(|_| std::io::Error::other("audit log lock poisoned"))?;
        if let Some(r) = self.target.rotation
            && !Self::to_stdout(&self.target.path)
            && r.due(open.written, buf.len() as u64)
        {
            *open = self.rotate(r)?;
        }
        open.out.write_all(&buf)?;
        open.written += buf.len() as u64;
        open.out.flush()
    }
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditLog")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use crate::engine::server::policy::Answer;
    use std::time::Duration;

    /// An entry begun on a virtual clock at 2026-11-18T11:06:40.123Z.
    fn entry() -> Entry {
        let c = ManualClock::new(UNIX_EPOCH + Duration::from_millis(1_795_000_000_123));
        Entry::begun("127.0.0.2:40000".parse().unwrap(), c.now(), c.wall())
    }

    #[test]
    fn an_ok_line_has_every_field() {
        let mut e = entry();
        e.user = Some("alice".into());
        e.test = Some(TestParams::of(&TestSpec {
            parallel: 2,
            direction: Direction::Reverse,
            rate_bps: 5_000_000,
            end: EndCondition::Time(3.0),
            ..Default::default()
        }));
        e.bytes_sent = 1000;
        e.bytes_received = 20;
        let now = e.started + Duration::from_millis(3217);
        let v: serde_json::Value = serde_json::from_str(&e.line(&Outcome::Ok, now)).unwrap();
        assert_eq!(v["time"], "2026-11-18T11:06:40.123Z");
        assert_eq!(v["peer"], "127.0.0.2:40000");
        assert_eq!(v["user"], "alice");
        assert_eq!(v["result"], "ok");
        assert!(v.get("reason").is_none() && v.get("message").is_none());
        let t = &v["test"];
        assert_eq!(t["protocol"], "tcp");
        assert_eq!(t["parallel"], 2);
        assert_eq!(t["time_s"], 3.0);
        assert!(t.get("bytes").is_none());
        assert_eq!(t["bitrate_bps"], 5_000_000);
        assert_eq!(t["direction"], "reverse");
        assert_eq!(v["bytes_sent"], 1000);
        assert_eq!(v["bytes_received"], 20);
        assert_eq!(v["duration_s"], 3.217);
    }

    #[test]
    fn a_refusal_at_the_door_has_no_test_and_names_its_reason() {
        let e = entry();
        let r = Refusal {
            reason: Reason::Address,
            answer: Answer::Busy,
            message: "127.0.0.2 is in 127.0.0.2/32 (--deny)".into(),
        };
        let line = e.line(&Outcome::Refused(r.reason, r.message), e.started);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["result"], "refused");
        assert_eq!(v["reason"], "address");
        assert_eq!(v["message"], "127.0.0.2 is in 127.0.0.2/32 (--deny)");
        assert!(v["test"].is_null() && v["user"].is_null());
        assert_eq!(v["bytes_sent"], 0);
        let err = e.line(&Outcome::Error("the client vanished".into()), e.started);
        let v: serde_json::Value = serde_json::from_str(&err).unwrap();
        assert_eq!(
            (v["result"].as_str(), v.get("reason")),
            (Some("error"), None)
        );
        assert!(!line.contains('\n') && !err.contains('\n'));
    }

    #[test]
    fn a_sessions_result_maps_to_one_outcome() {
        let refusal = Refusal {
            reason: Reason::Busy,
            answer: Answer::Busy,
            message: "2 test(s) already running".into(),
        };
        // A recorded refusal wins, whatever the session returned.
        assert_eq!(
            Outcome::of(&Ok(false), Some(refusal.clone())),
            Some(Outcome::Refused(Reason::Busy, refusal.message.clone()))
        );
        let spec_err = crate::spec::SpecError {
            code: crate::wire::ErrCode::NumStreams,
            message: "too many".into(),
        };
        assert_eq!(
            Outcome::of(&Err(TestError::Refused(spec_err.clone())), None),
            Some(Outcome::Refused(Reason::Params, "too many".into()))
        );
        assert_eq!(Outcome::of(&Ok(true), None), Some(Outcome::Ok));
        assert_eq!(Outcome::of(&Ok(false), None), None);
        match Outcome::of(&Err(TestError::ClientOvertime), None) {
            Some(Outcome::Error(m)) => assert!(!m.is_empty()),
            other => panic!("{other:?}"),
        }
        match Outcome::of(&Err(crate::engine::Stopped::ClientTerminated.into()), None) {
            Some(Outcome::Error(m)) => assert!(m.starts_with("stopped: "), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn byte_and_block_tests_name_their_end_condition() {
        let p = TestParams::of(&TestSpec {
            protocol: Protocol::Udp,
            end: EndCondition::Blocks(7),
            direction: Direction::Bidir,
            ..Default::default()
        });
        assert_eq!(
            (p.protocol, p.time_s, p.bytes, p.blocks, p.direction),
            ("udp", None, None, Some(7), "bidir")
        );
    }

    #[test]
    fn rfc3339_dates_cross_years_and_leap_days() {
        let at = |s: u64| rfc3339_ms(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00.000Z");
        assert_eq!(at(1_767_225_599), "2025-12-31T23:59:59.000Z");
    }

    #[test]
    fn rotation_is_due_only_past_the_bound() {
        let r = Rotation {
            max_bytes: 100,
            keep: 2,
        };
        assert!(!r.due(0, 500), "a long first line goes whole");
        assert!(!r.due(60, 40));
        assert!(r.due(60, 41));
        assert!(!r.due(0, 100));
        assert!(r.due(u64::MAX, 1));
    }

    #[test]
    fn a_full_file_rotates_keeping_the_newest_old_files() {
        let dir = std::env::temp_dir().join(format!("nm-audit-rot-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.jsonl");
        let log = AuditLog::open(&Target {
            path: path.clone(),
            rotation: Some(Rotation {
                max_bytes: 20,
                keep: 2,
            }),
        })
        .unwrap();
        // Each line is 10 bytes with its newline: two per file.
        for i in 0..7 {
            log.write(&format!("line {i:04}")).unwrap();
        }
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
        assert_eq!(read("audit.jsonl"), "line 0006\n");
        assert_eq!(read("audit.jsonl.1"), "line 0004\nline 0005\n");
        assert_eq!(read("audit.jsonl.2"), "line 0002\nline 0003\n");
        assert!(!dir.join("audit.jsonl.3").exists());
        // Reopened after an outside rotation: the new file takes the next line.
        std::fs::rename(&path, dir.join("moved")).unwrap();
        log.reopen().unwrap();
        log.write("after hup").unwrap();
        assert_eq!(read("audit.jsonl"), "after hup\n");
        assert_eq!(read("moved"), "line 0006\n");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_summary_line_says_how_many_refusals_it_stands_for() {
        let since = ManualClock::at_unix(951_782_000).now();
        let s = Summary {
            source: super::super::refusal_log::Source::Addr([127, 0, 0, 2].into()),
            reason: Reason::Rate,
            count: 41,
            since,
        };
        let wall = UNIX_EPOCH + Duration::from_secs(951_782_400);
        let line = summary_line(&s, wall, since + Duration::from_millis(60_500));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["time"], "2000-02-29T00:00:00.000Z");
        assert_eq!(v["peer"], "127.0.0.2");
        assert_eq!(v["result"], "refused");
        assert_eq!(v["reason"], "rate");
        assert_eq!(v["count"], 41);
        assert_eq!(v["duration_s"], 60.5);
        assert!(v["message"].as_str().unwrap().contains("41 more"), "{v}");
        // An ordinary line has no count.
        let e = entry();
        assert!(!e.line(&Outcome::Ok, e.started).contains("count"));
    }
}
