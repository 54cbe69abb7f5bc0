//! UDP options (`-u`, 64-bit counters, segmentation and receive offload, Don't
//! Fragment), as typed.

/// UDP options, as typed.
#[derive(Debug, Default, clap::Args)]
pub struct UdpFlags {
    /// Use UDP.
    #[arg(short = 'u', long = "udp")]
    pub udp: bool,
    /// 64-bit UDP sequence numbers.
    #[arg(long = "udp-counters-64bit")]
    pub udp_counters_64bit: bool,
    /// UDP: the sending side (this one, the server with -R, both with --bidir) sends one
    /// datagram per message instead of using segmentation offload (UDP_SEGMENT), as
    /// iperf3 does by default. Compare with iperf3 this way.
    #[arg(long = "no-gso")]
    pub no_gso: bool,
    /// UDP: the receiving side reads one datagram per message instead of using receive
    /// offload (UDP_GRO).
    #[arg(long = "no-gro")]
    pub no_gro: bool,
    /// iperf3 3.21's switch for UDP GSO and GRO. netmeter uses both by default where the
    /// kernel offers them, so this changes nothing (see --no-gso, --no-gro).
    #[arg(long = "gsro")]
    pub gsro: bool,
    /// UDP over IPv4: set the Don't Fragment bit (IP_PMTUDISC_DO) on both ends' data
    /// sockets; a datagram larger than the path MTU then fails instead of fragmenting.
    #[arg(long = "dont-fragment")]
    pub dont_fragment: bool,
}
