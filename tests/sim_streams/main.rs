//! The simulator tier for the TCP, profile, bounceback, connect and `--txstart-time`
//! stream machines (`netmeter::engine::machine`): each machine driven on virtual time
//! over a modelled link, its figures checked exactly against what the link did.
//!
//! Runs as a normal user in well under a second; nothing here opens a socket or reads
//! the host's clocks.

mod bounce;
mod connect;

mod experiment;
mod frames;
mod net;
mod pipe;
mod profile;
mod snapshot;
mod tcp;
mod txstart;
mod udp_bounce;
mod whole;
mod whole_tests;
mod working_load;
mod world;
