//! `netmeter rpm`: the IETF responsiveness test (draft-ietf-ippm-responsiveness) as a
//! client of any responsiveness server, next to the netmeter-to-netmeter working-load
//! measurement (`--working-load`).
//!
//! The parts, pure first: `algo` (the draft's saturation algorithm and its
//! responsiveness formula, `now` passed in), `algo_math` (the trimmed mean, the moving
//! averages and the stability test it uses), `config` (the server's `/.well-known/nq`
//! configuration document, read as hostile input) and `summary` (the probes as `-J`
//! records and per-kind percentiles); then the I/O: `net` (TLS, one HTTP/2 connection
//! timed, the small GET, the load transfers) and `client` (the driver, on a tokio
//! runtime of its own), and `output` (pure: the `-J` document, the text, the chart).
//! docs/rpm.md says what is measured. `netmeter rpm-server`, the server, is `server*`
//! and `tls` (docs/rpm-server.md).

pub mod algo;
pub mod algo_math;
pub mod client;
pub mod config;
pub mod h3_net;
pub mod h3_server;
pub mod histogram;
pub mod net;
pub mod output;
pub mod sendq;
pub mod server;
pub mod server_body;
pub mod server_config;
pub mod server_policy;
pub mod summary;
pub mod tls;
