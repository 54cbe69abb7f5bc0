//! Experiments built from several tests (issue 13): statistics over repeated runs,
//! sweeps over option grids, and the comparison of two saved results with a verdict.

pub mod cli;
pub mod compare;
pub mod figures;
pub mod repeat;
pub mod stats;
pub mod sweep;
