//! Experiments built from several tests: statistics over repeated runs and the
//! comparison of two saved results with a verdict (issue 13).

pub mod cli;
pub mod compare;
pub mod figures;
pub mod repeat;
pub mod stats;
