//! Experiments built from several tests (issue 13): statistics over repeated runs,
//! sweeps over option grids, and the comparison of two saved results with a verdict.

pub mod cli;
pub mod compare;
pub mod csv;
pub mod figures;
pub mod repeat;
pub mod stats;
pub mod sweep;
pub mod sweep_plot;

/// One test of a series (a repetition, a sweep point), run quietly: its report, or
/// how the series ends: `("interrupted", None)` after a stop signal (the partial run
/// is dropped), `("failed: ...", Some(error))` when the test failed.
pub(crate) fn series_step(
    cfg: &crate::TestConfig,
) -> Result<crate::Report, (String, Option<crate::TestError>)> {
    crate::run(cfg, &mut crate::report::observe::Quiet).map_err(|e| {
        if e.stopped().is_some_and(|s| s.by_signal()) {
            ("interrupted".to_string(), None)
        } else {
            (format!("failed: {e}"), Some(e))
        }
    })
}
