//! Experiments run from the flat command line (`--find-max-rate`, `--repeat`,
//! `--confidence`) and the line rate a result is judged against, as typed.

use super::number;

/// Experiment options, as typed.
#[derive(Debug, Default, clap::Args)]
pub struct ExperimentFlags {
    /// Client: the peak to judge the received throughput against, in bits/s (10G), or
    /// memcpy (this host's one-thread memory copy rate, for loopback); the end says
    /// "N% of" it, and -J's end.netmeter.efficiency holds it. Default: the interface's
    /// link speed where the kernel knows it.
    #[arg(long = "line-rate", value_name = "RATE|memcpy")]
    pub line_rate: Option<String>,
    /// Search for the highest UDP rate whose loss stays within --loss-target (RFC 2544
    /// style); each trial runs -t seconds (default 2 here).
    #[arg(long = "find-max-rate")]
    pub find_max_rate: bool,
    /// Loss allowed by --find-max-rate, in percent.
    #[arg(long = "loss-target", value_name = "PCT", default_value_t = 0.1, value_parser = number("--loss-target", "a percentage such as 0.1"))]
    pub loss_target: f64,
    /// Run the test N times (at most N with --confidence) and report each key figure's
    /// mean, standard deviation, min/max and confidence interval.
    #[arg(long = "repeat", value_name = "N")]
    pub repeat: Option<u32>,
    /// Seconds to wait between --repeat runs.
    #[arg(long = "repeat-gap", value_name = "SEC", default_value_t = 1.0, value_parser = number("--repeat-gap", "a number of seconds"))]
    pub repeat_gap: f64,
    /// With --repeat: stop once the receiver throughput's LEVEL % confidence interval is
    /// within ±WIDTH % of its mean (netperf -I), e.g. 95,5.
    #[arg(long = "confidence", value_name = "LEVEL,WIDTH%")]
    pub confidence: Option<String>,
}
