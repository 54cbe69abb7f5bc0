//! Options of tests among many hosts (third-party tests, `--via`, a common start
//! time), as typed.

use super::number;

/// Many-host options, as typed.
#[derive(Debug, Default, clap::Args)]
pub struct HostsFlags {
    /// Set up first, then start sending at this wall-clock time in seconds since the Unix
    /// epoch (e.g. $(( $(date +%s) + 10 ))), so several clients start together.
    #[arg(long = "txstart-time", value_name = "EPOCH", value_parser = number("--txstart-time", "seconds since the Unix epoch"))]
    pub txstart_time: Option<f64>,
    /// Server: run third-party tests (a controller with the --psk-file key asks this
    /// server to test toward another) to targets in these address blocks,
    /// e.g. 10.0.0.0/8,fd00::/64.
    #[arg(long = "allow-third-party", value_name = "CIDR,...")]
    pub allow_third_party: Option<String>,
    /// Client: have HOST (a netmeter server with --allow-third-party, default port
    /// 5201) run this test toward -c's server and send its report here; needs
    /// --psk-file with HOST's key. Only the test's own options go to HOST.
    #[arg(long = "via", value_name = "HOST[:PORT]")]
    pub via: Option<String>,
}
