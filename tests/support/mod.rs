//! Shared helpers for integration tests.
//!
//! Test files pull this in with `mod support;`. Not every test binary uses every
//! helper, hence the crate-wide `dead_code` allowance below.
#![allow(dead_code)]

pub mod netbed;
