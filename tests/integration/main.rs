//! netmeter's integration tests, one binary with one module per subject (so one link,
//! and one helper tree: [`support`]). Select a subject with a module filter, e.g.
//! `cargo test --test integration e2e::` or `cargo test --test integration interop::iperf3_322`.
//!
//! Two tiers:
//!
//! * **quick** (plain `cargo test`): everything that runs on any Linux machine with Rust,
//!   as a normal user, without the peers: the client modes end to end over loopback,
//!   the control protocol's robustness, interrupts, profiles, renderers' output.
//! * **full** (`cargo test --features full-tests`; `scripts/test.sh` and CI run these
//!   tests from the quick build with `--ignored`): adds the tests that run for seconds
//!   (a multi-second run, many runs, a ramp; so that the quick tier's tests finish in
//!   about a minute on a 2-CPU machine) and the tests that need root (network
//!   namespaces for the emulated link of [`support::netbed`], real-time priority,
//!   socket options only root may set) or the
//!   real peers installed by `scripts/setup-peers.sh` (iperf3 3.12/3.18/3.22, iperf 2,
//!   netperf). Without the feature they are compiled but marked ignored, with the reason
//!   (`cargo test` lists them as `ignored, full tier: ...`); with it they run, and a
//!   missing requirement fails them with the fix in the message, never skips them.
//!
//! A full-tier test carries
//! `#[cfg_attr(not(feature = "full-tests"), ignore = "full tier: ...")]`.
//!
//! `scripts/test.sh` runs the full tier one module at a time, as when each was a binary
//! of its own, so the accuracy modules' measurements and the interop and end-to-end byte
//! counts never share the CPU with another module's tests; plain `cargo test` runs the
//! quick tier all at once.

#[macro_use]
mod support;

mod accuracy;
mod auth;
mod bounceback;
mod cli;
mod connect_only;
mod door;
mod e2e;
mod ecn;
mod experiments;
mod exposure;
mod figures;
mod host;
mod host_load;
mod interop;
mod interrupt;
mod iperf2_client;
mod iperf2_client_udp;
mod iperf2_client_udp_back;
mod iperf2_delay;
mod iperf2_isoch;
mod iperf2_server;
mod iperf2_ui;
mod latency_accuracy;
mod memory;
mod mesh;
mod multicast;
mod netbed_selftest;
mod options;
mod package;
mod peer_figures;
mod plots;
mod policy;
mod profiles;
mod psk;
mod results;
mod robustness;
mod rpm;
mod rpm_h3;
mod rpm_server;
mod rpm_truth;
mod scenario;
mod trip_times;
mod working_load;
