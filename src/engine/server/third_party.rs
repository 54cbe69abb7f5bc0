//! Third-party tests on the server side: an authenticated controller asks this server
//! to run a client test toward another server; this server checks the target against
//! its `--allow-third-party` list, runs the test with the library's client
//! (`engine::client::run`, what `netmeter::run` calls) and sends the whole report back
//! (state 0x42, docs/protocol.md "Third-party tests"). While the test runs it watches
//! the controller's connection: `CLIENT_TERMINATE` there (the controller was stopped,
//! e.g. Ctrl-C of `netmeter scenario`), or the connection gone, stops the test, and
//! what it measured until then goes back with its error (`watch_controller`).
//!
//! The allow list is a small CIDR check of its own ([`Cidr`]). Seam: the server policy
//! work (issue 15, "server policy as one object") brings a general allow/deny policy;
//! [`ThirdPartyPolicy::allows`] is the one call to replace with it.

use super::audit::{Entry, TestParams};
use super::policy::{Answer, Reason, Refusal};
use super::{Shared, SlotGuard, shown};
use crate::control::ClientFailure;
use crate::engine::TestError;
use crate::engine::client::ClientConfig;
use crate::engine::ctrl::Ctrl;
use crate::report::observe::Quiet;
use crate::wire::{ErrCode, State, ThirdPartyAnswer, ThirdPartyRequest};
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Turns a request into the client test to run (the target already resolved to `ip`).
/// The CLI provides it (`cli::third_party::config_for`): which client options a
/// controller may choose is a flag-level decision, and the engine does not parse flags.
pub type BuildConfig = fn(&ThirdPartyRequest, IpAddr) -> Result<ClientConfig, String>;

/// `--allow-third-party CIDR,...`: the targets this server runs third-party tests to.
#[derive(Debug, Clone)]
pub struct ThirdPartyPolicy {
    pub allowed: Vec<Cidr>,
    pub build: BuildConfig,
}

impl ThirdPartyPolicy {
    /// Whether a test toward `ip` is allowed.
    pub fn allows(&self, ip: IpAddr) -> bool {
        let ip = super::canon(ip);
        self.allowed.iter().any(|c| c.contains(ip))
    }
}

/// An address block, `10.0.0.0/24`, `fd00::/64` or one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    /// `ADDR/PREFIX` or `ADDR`; host bits must be zero (a typo otherwise).
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let s = s.trim();
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("'{s}' is not an address or ADDR/PREFIX block"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            None => max,
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= max => n,
                _ => return Err(format!("'{s}': the prefix length must be 0 to {max}")),
            },
        };
        let c = Cidr { addr, prefix };
        if c.network_bits(addr) != bits(addr) {
            return Err(format!("'{s}' has host bits set; did you mean {}?", {
                let net = c.network_bits(addr);
                let shown = match addr {
                    IpAddr::V4(_) => IpAddr::from((net as u32).to_be_bytes()),
                    IpAddr::V6(_) => IpAddr::from(net.to_be_bytes()),
                };
                format!("{shown}/{prefix}")
            }));
        }
        Ok(c)
    }

    /// A list, comma-separated.
    pub fn parse_list(s: &str) -> Result<Vec<Cidr>, String> {
        s.split(',')
            .filter(|p| !p.trim().is_empty())
            .map(Cidr::parse)
            .collect()
    }

    fn network_bits(&self, ip: IpAddr) -> u128 {
        let width = if ip.is_ipv4() { 32 } else { 128 };
        let host = width - u32::from(self.prefix);
        let mask = if host >= 128 { 0 } else { !0u128 << host };
        bits(ip) & mask
    }

    /// Whether `ip` (same family) is inside the block.
    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.addr.is_ipv4() && self.network_bits(ip) == bits(self.addr)
    }
}

fn bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn answer(ctrl: &mut Ctrl, a: &ThirdPartyAnswer) {
    if ctrl.send_state(State::NetmeterThirdParty).is_ok() {
        let _ = ctrl.send_json(a, "the third-party answer");
    }
}

/// Refuse a request: the controller gets `why` in the third-party answer, the log a
/// line, and the audit log and metrics the refusal (`entry.refused`).
fn refuse(shared: &Shared, mut ctrl: Ctrl, entry: &mut Entry, r: Refusal) -> bool {
    shared.log(&format!(
        "refused a third-party request from {}: {}",
        shown(entry.peer),
        r.message
    ));
    answer(
        &mut ctrl,
        &ThirdPartyAnswer {
            error: Some(r.message.clone()),
            ..Default::default()
        },
    );
    ctrl.close_gracefully(Duration::from_millis(500));
    entry.refused = Some(r);
    false
}

/// A refusal of the request itself (not of the test it asks for).
fn not_taken(why: String) -> Refusal {
    Refusal {
        reason: Reason::ThirdParty,
        answer: Answer::Error(ErrCode::AuthTest),
        message: why,
    }
}

/// Serve one third-party request on `ctrl` (the parameters read, the pre-shared key
/// checked if this server has one: `authenticated`). Returns whether a test ran.
pub(super) fn serve(
    shared: &Arc<Shared>,
    mut ctrl: Ctrl,
    entry: &mut Entry,
    req: &ThirdPartyRequest,
    authenticated: bool,
) -> bool {
    if !authenticated {
        return refuse(shared, ctrl, entry, not_taken("this server takes third-party requests only from a controller holding its pre-shared key, and it has none (start it with --psk-file)".into()));
    }
    let Some(policy) = &shared.cfg.third_party else {
        return refuse(shared, ctrl, entry, not_taken("this server does not run third-party tests (start it with --allow-third-party CIDR,...)".into()));
    };
    let ip = match (req.target.as_str(), req.port).to_socket_addrs() {
        Ok(mut addrs) => match addrs.next() {
            Some(a) => a.ip(),
            None => {
                let why = format!("'{}' has no address here", req.target);
                return refuse(shared, ctrl, entry, not_taken(why));
            }
        },
        Err(_) => {
            let why = format!("cannot resolve '{}' on this server", req.target);
            return refuse(shared, ctrl, entry, not_taken(why));
        }
    };
    if !policy.allows(ip) {
        let why = format!(
            "the target {} ({ip}) is not in this server's --allow-third-party list",
            req.target
        );
        return refuse(shared, ctrl, entry, not_taken(why));
    }
    let mut cfg = match (policy.build)(req, ip) {
        Ok(c) => c,
        Err(why) => return refuse(shared, ctrl, entry, not_taken(why)),
    };
    // This server's own limits (--server-max-duration, --server-bitrate-limit,
    // --max-streams) hold for the tests it runs for others too.
    entry.test = Some(TestParams::of(&cfg.spec));
    if let Err(mut r) = shared.cfg.policy.check_test(&cfg.spec) {
        r.message = format!("over this server's limits: {}", r.message);
        return refuse(shared, ctrl, entry, r);
    }
    // The test runs from this host: it takes one of this server's test slots, so a
    // host is never source and server of more tests than --max-tests at once.
    let taken = shared.active.fetch_add(1, Ordering::AcqRel);
    let _slot = SlotGuard(shared.clone());
    if let Some(r) = shared.cfg.policy.busy(taken) {
        let _ = ctrl.send_state(State::AccessDenied);
        shared.log(&format!(
            "refused a third-party request from {}: {}",
            shown(entry.peer),
            r.message
        ));
        ctrl.close_gracefully(Duration::from_millis(200));
        entry.refused = Some(r);
        return false;
    }
    shared.touch();
    shared.log(&format!(
        "third-party test for {}: to {ip} port {} with [{}]",
        shown(entry.peer),
        req.port,
        req.args.join(" ")
    ));
    // The target may want the key too (a mesh's hosts all have it): prove ours; a
    // target without a key does not ask, and then the test runs without it.
    cfg.psk = shared.cfg.psk.as_deref().cloned();
    let stop = Arc::new(AtomicBool::new(false));
    cfg.stop = Some(stop.clone());
    let done = Arc::new(AtomicBool::new(false));
    let watcher = ctrl.sock.try_clone().ok().and_then(|sock| {
        let (stop, done) = (stop.clone(), done.clone());
        std::thread::Builder::new()
            .name("nm-3p-watch".into())
            .spawn(move || watch_controller(sock, &stop, &done))
            .ok()
    });
    let (mut report, result) = run_test(&cfg);
    done.store(true, Ordering::Release);
    if let Some(w) = watcher {
        let _ = w.join();
    }
    let stopped = stop.load(Ordering::Acquire);
    let a = match result {
        Ok(()) => ThirdPartyAnswer {
            report: serde_json::from_str(&crate::report::json::document(&report)).ok(),
            ..Default::default()
        },
        // Stopped by its controller: what ran goes back, its error inside.
        Err(e) if stopped => {
            let ran = report.intervals.len();
            let why = stopped_wording(&e);
            let other = if why == STOPPED_BY_CONTROLLER {
                String::new()
            } else {
                format!(": {why}")
            };
            shared.log(&format!(
                "third-party test for {} to {ip} stopped by its controller after {ran} interval(s){other}",
                shown(entry.peer)
            ));
            report.error = Some(why.clone());
            ThirdPartyAnswer {
                report: serde_json::from_str(&crate::report::json::document(&report)).ok(),
                error: Some(why),
                busy: false,
            }
        }
        Err(e) => {
            shared.log(&format!("third-party test to {ip} failed: {e:#}"));
            ThirdPartyAnswer {
                busy: is_busy(&e),
                error: Some(format!("{e:#}")),
                report: None,
            }
        }
    };
    answer(&mut ctrl, &a);
    ctrl.close_gracefully(Duration::from_secs(2));
    shared.touch();
    true
}

/// How a test stopped by its controller ended, in words (`report.error` and the log
/// alike). This host's client heeds the controller's stop as it heeds a signal, and so
/// would say "the client has terminated by signal Interrupt(2)", though this host got
/// none: the stop is its controller's. Any other error (one that came first) stays as
/// it was.
fn stopped_wording(e: &TestError) -> String {
    match e.stopped() {
        Some(crate::engine::Stopped::ClientInterrupted(_)) => STOPPED_BY_CONTROLLER.to_string(),
        _ => format!("{e:#}"),
    }
}

/// The error of a third-party test its controller stopped (`CLIENT_TERMINATE`, or the
/// controller's connection gone): what the far host logs and the controller's flow
/// reads.
pub const STOPPED_BY_CONTROLLER: &str = "interrupt - the test was stopped by its controller";

/// Run the client test; a target without a key (it did not ask for ours) gets the test
/// again without it.
fn run_test(cfg: &ClientConfig) -> (crate::report::Report, Result<(), TestError>) {
    let mut out = crate::engine::client::run_keeping_report(cfg, &mut Quiet);
    if matches!(out.1, Err(TestError::Client(ClientFailure::NoPskChallenge))) {
        let mut cfg = cfg.clone();
        cfg.psk = None;
        // The target took a test slot for the attempt we dropped and frees it once it
        // notices the closed connection: a moment of "busy" is that, not a rival test.
        for _ in 0..20 {
            out = crate::engine::client::run_keeping_report(&cfg, &mut Quiet);
            match &out.1 {
                Err(e) if is_busy(e) => std::thread::sleep(Duration::from_millis(100)),
                _ => break,
            }
        }
    }
    out
}

/// How often the watcher looks whether the test has ended.
const WATCH_SLICE: Duration = Duration::from_millis(100);

/// Watch the controller's connection while its test runs (until `done`): its
/// `CLIENT_TERMINATE`, or the connection closed or broken, sets `stop`, which the
/// running test heeds as a stop signal (`Ctrl::stop`). Anything else it sends is
/// ignored: the controller has nothing else to say during the test.
fn watch_controller(mut sock: std::net::TcpStream, stop: &AtomicBool, done: &AtomicBool) {
    use std::io::Read;
    if sock.set_read_timeout(Some(WATCH_SLICE)).is_err() {
        return;
    }
    let mut b = [0u8; 1];
    while !done.load(Ordering::Acquire) {
        match sock.read(&mut b) {
            Ok(1) if matches!(State::from_byte(b[0]), Ok(State::ClientTerminate)) => break,
            Ok(1) => continue,
            // Closed: nobody waits for this test's report any more.
            Ok(_) => break,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                continue;
            }
            Err(_) => break,
        }
    }
    if !done.load(Ordering::Acquire) {
        stop.store(true, Ordering::Release);
    }
}

/// The test's server was busy (iperf3's access denied): worth trying again later.
fn is_busy(e: &TestError) -> bool {
    matches!(
        e,
        TestError::Client(ClientFailure::AccessDenied)
            | TestError::BusySaid(_)
            | TestError::Peer {
                code: crate::wire::ErrCode::AccessDenied,
                ..
            }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn cidr_blocks_contain_their_addresses_only() {
        let c = Cidr::parse("10.1.0.0/16").unwrap();
        assert!(c.contains(ip("10.1.255.3")));
        assert!(!c.contains(ip("10.2.0.1")));
        assert!(!c.contains(ip("::1")));
        let one = Cidr::parse("192.0.2.7").unwrap();
        assert!(one.contains(ip("192.0.2.7")) && !one.contains(ip("192.0.2.8")));
        let all = Cidr::parse("0.0.0.0/0").unwrap();
        assert!(all.contains(ip("203.0.113.9")));
        let v6 = Cidr::parse("fd00:1::/32").unwrap();
        assert!(v6.contains(ip("fd00:1:ffff::1")) && !v6.contains(ip("fd00:2::1")));
        assert!(Cidr::parse("::/0").unwrap().contains(ip("2001:db8::1")));
    }

    #[test]
    fn cidr_typos_are_one_sentence() {
        assert!(
            Cidr::parse("10.0.0.1/24")
                .unwrap_err()
                .contains("10.0.0.0/24")
        );
        assert!(Cidr::parse("10.0.0.0/33").unwrap_err().contains("0 to 32"));
        assert!(Cidr::parse("ten/8").unwrap_err().contains("not an address"));
        assert_eq!(Cidr::parse_list("10.0.0.0/8, 127.0.0.1").unwrap().len(), 2);
    }

    #[test]
    fn a_test_its_controller_stopped_says_so_not_signal_interrupt() {
        let stop = TestError::from(crate::engine::Stopped::ClientInterrupted(libc::SIGINT));
        // What the client itself would say: a signal this host never got.
        assert!(format!("{stop:#}").contains("signal Interrupt(2)"));
        let said = stopped_wording(&stop);
        assert_eq!(said, STOPPED_BY_CONTROLLER);
        assert!(said.contains("stopped by its controller") && !said.contains("signal"));
        // An error of its own, before the stop, stays what it was.
        let other = TestError::from(crate::engine::Stopped::ServerTerminated);
        assert_eq!(stopped_wording(&other), "the server has terminated");
    }

    #[test]
    fn policy_sees_v4_mapped_addresses_as_v4() {
        fn build(_: &ThirdPartyRequest, _: IpAddr) -> Result<ClientConfig, String> {
            Err("unused".into())
        }
        let p = ThirdPartyPolicy {
            allowed: Cidr::parse_list("127.0.0.0/8").unwrap(),
            build,
        };
        assert!(p.allows(ip("::ffff:127.0.0.1")));
        assert!(!p.allows(ip("10.0.0.1")));
    }
}
