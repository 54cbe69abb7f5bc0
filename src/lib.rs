//! netmeter: network performance measurement, wire-compatible with iperf3.
//!
//! Data flows one way through the modules: flags ([`cli`]) become a [`spec::TestSpec`];
//! the control conversation ([`control`], over [`wire`] bytes) is driven by the
//! [`engine`], whose stream threads feed [`stats`]; the results become a typed
//! [`report::Report`] that renderers print as iperf3-style text or JSON.
//! `ARCHITECTURE.md` is the map.

// `unsafe` lives only in `sock`, the platform layer, which allows it for itself.
#![deny(unsafe_code)]

pub mod auth;
pub mod cli;
pub mod clock;
pub mod clocksync;
pub mod control;
pub mod engine;
pub mod experiment;
pub mod host;
pub mod latency;
pub mod mesh;
pub mod pacing;
pub mod profile;
pub mod report;
pub mod rpm;
pub mod scenario;
pub mod search;
pub mod sim;
pub mod sock;
pub mod spec;
pub mod stats;
pub mod units;
pub mod version;
pub mod wire;

#[cfg(test)]
mod house_rules;

/// A client test's resolved configuration (flags, or a program's own choice).
pub use engine::TestError;
pub use engine::client::ClientConfig as TestConfig;
pub use report::Report;
pub use report::observe::{Event, Observer};

/// Run one test as the client: connect, negotiate, move data, and return the
/// [`Report`]. `obs` is told what happens as it happens ([`Event`]s): pass
/// [`engine::client::renderer`] for iperf3's text or JSON output, or
/// [`report::observe::Quiet`] to keep only the returned report.
pub fn run(cfg: &TestConfig, obs: &mut dyn Observer) -> Result<Report, TestError> {
    let (report, result) = run_keeping_report(cfg, obs);
    result.map(|_| report)
}

/// As [`run`], but the [`Report`] comes back whatever happened: a test stopped by a
/// signal or by an error keeps the intervals and partial summary it had (and the
/// error in `Report::error`), for a caller that still wants to draw or save them.
pub fn run_keeping_report(
    cfg: &TestConfig,
    obs: &mut dyn Observer,
) -> (Report, Result<(), TestError>) {
    match cfg.iperf2 {
        // An iperf 2 server (`--iperf2`, `netmeter iperf2 -c`): iperf 2's wire.
        Some(_) => engine::client::run_keeping_report_on(cfg, obs, engine::iperf2_client::run),
        None => engine::client::run_keeping_report(cfg, obs),
    }
}
