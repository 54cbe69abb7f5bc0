//! Experiments built from several tests (issue 13): statistics over repeated runs,
//! sweeps over option grids, and the comparison of two saved results with a verdict.

pub mod compare;
pub mod csv;
pub mod figures;
pub mod grid;
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

#[cfg(test)]
mod tests {
    /// The layering ARCHITECTURE.md draws: `cli` sits above `experiment` (it parses the
    /// `compare` and `sweep` flags and hands `sweep` the client's parser), so no file
    /// here names `cli`, tests included; and the sweep's charts and CSV rows read the
    /// grid from `grid`, not from the sweep that draws them.
    #[test]
    fn experiment_imports_nothing_of_cli() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/experiment");
        // Spelled in two parts so that this test's own lines do not match.
        let (cli, sweep) = (["crate", "::cli"].concat(), ["super", "::sweep::"].concat());
        let mut files = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            files += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            for (n, line) in text.lines().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                let at = format!("{}:{}", path.display(), n + 1);
                assert!(!code.contains(&cli), "{at}: {line}");
                if path.ends_with("sweep_plot.rs") || path.ends_with("csv.rs") {
                    assert!(!code.contains(&sweep), "{at}: {line}");
                }
            }
        }
        assert!(files >= 9, "{files} files in {}", dir.display());
    }
}
