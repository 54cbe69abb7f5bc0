//! `netmeter rpm`: the IETF responsiveness test (draft-ietf-ippm-responsiveness) as a
//! client of any responsiveness server, next to the netmeter-to-netmeter working-load
//! measurement (`--working-load`).
//!
//! The parts, pure first: `algo` (the draft's saturation algorithm and its
//! responsiveness formula, `now` passed in), `algo_math` (the trimmed mean, the moving
//! averages and the stability test it uses), `config` (the server's `/.well-known/nq`
//! configuration document, read as hostile input) and `summary` (the probes as `-J`
//! records and per-kind percentiles). docs/rpm.md says what is measured.

pub mod algo;
pub mod algo_math;
pub mod config;
pub mod summary;
