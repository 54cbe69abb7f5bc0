//! Quantities as users type them and as iperf3 prints them.
//!
//! iperf3 reads byte quantities (`-n`, `-l`, `-w`) with 1024-based suffixes and rates
//! (`-b`, `--fq-rate`) with 1000-based ones, and prints "Transfer" in 1024-based bytes and
//! "Bitrate" in 1000-based bits (`src/units.c`). netmeter keeps exactly those conventions
//! so numbers read the same in both tools.

use std::fmt;

/// Why a quantity could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a valid quantity (expected a number with an optional K, M, G or T suffix)")]
pub struct BadQuantity(pub String);

fn split_suffix(s: &str) -> Result<(f64, char), BadQuantity> {
    let s = s.trim();
    let bad = || BadQuantity(s.to_string());
    let (num, suf) = match s.chars().last() {
        Some(c) if c.is_ascii_alphabetic() => (&s[..s.len() - 1], c.to_ascii_uppercase()),
        Some(_) => (s, ' '),
        None => return Err(bad()),
    };
    let v: f64 = num.parse().map_err(|_| bad())?;
    if !v.is_finite() || v < 0.0 {
        return Err(bad());
    }
    if !matches!(suf, ' ' | 'K' | 'M' | 'G' | 'T') {
        return Err(bad());
    }
    Ok((v, suf))
}

fn scale(suf: char, base: f64) -> f64 {
    match suf {
        'K' => base,
        'M' => base * base,
        'G' => base * base * base,
        'T' => base * base * base * base,
        _ => 1.0,
    }
}

/// Parse a byte quantity with 1024-based suffixes (`128K` = 131072).
pub fn parse_bytes(s: &str) -> Result<u64, BadQuantity> {
    let (v, suf) = split_suffix(s)?;
    let r = v * scale(suf, 1024.0);
    if r > u64::MAX as f64 {
        return Err(BadQuantity(s.to_string()));
    }
    Ok(r as u64)
}

/// Parse a rate in bits per second with 1000-based suffixes (`10M` = 10,000,000).
pub fn parse_rate(s: &str) -> Result<u64, BadQuantity> {
    let (v, suf) = split_suffix(s)?;
    let r = v * scale(suf, 1000.0);
    if r > u64::MAX as f64 {
        return Err(BadQuantity(s.to_string()));
    }
    Ok(r as u64)
}

/// Parse `-b RATE[/BURST]`: bits per second and an optional burst count.
pub fn parse_rate_burst(s: &str) -> Result<(u64, Option<u32>), BadQuantity> {
    match s.split_once('/') {
        None => Ok((parse_rate(s)?, None)),
        Some((r, b)) => {
            let burst: u32 = b.trim().parse().map_err(|_| BadQuantity(s.to_string()))?;
            Ok((parse_rate(r)?, Some(burst)))
        }
    }
}

/// The `-f` report format: a fixed unit or adaptive, in bits or bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Adaptive: bytes for transfer, bits for rates (iperf3's default).
    #[default]
    Auto,
    /// A fixed unit letter as given to `-f`: k m g t (bits) or K M G T (bytes).
    Fixed(char),
}

impl Format {
    /// Parse the argument of `-f`.
    pub fn parse(s: &str) -> Result<Format, String> {
        let mut it = s.chars();
        match (it.next(), it.next()) {
            (Some(c), None) if "kmgtKMGT".contains(c) => Ok(Format::Fixed(c)),
            (Some('a'), None) | (Some('A'), None) => Ok(Format::Auto),
            _ => Err(format!(
                "'{s}' is not a valid format; use one of k, m, g, t (bits) or K, M, G, T (bytes)"
            )),
        }
    }
}

/// A value already scaled to a unit, printed the way iperf3's `unit_snprintf` does.
struct Scaled {
    v: f64,
    unit: &'static str,
}

impl fmt::Display for Scaled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // iperf3 picks the precision by magnitude so every number is about 4 wide.
        if self.v < 9.995 {
            write!(f, "{:4.2} {}", self.v, self.unit)
        } else if self.v < 99.95 {
            write!(f, "{:4.1} {}", self.v, self.unit)
        } else {
            write!(f, "{:4.0} {}", self.v, self.unit)
        }
    }
}

fn fixed_index(c: char) -> usize {
    match c.to_ascii_lowercase() {
        'k' => 1,
        'm' => 2,
        'g' => 3,
        _ => 4,
    }
}

fn scale_to(value: f64, base: f64, fmt: Format, adaptive_limit: f64) -> (f64, usize) {
    match fmt {
        Format::Fixed(c) => {
            let i = fixed_index(c);
            (value / base.powi(i as i32), i)
        }
        Format::Auto => {
            let mut v = value;
            let mut i = 0;
            while v >= adaptive_limit && i < 4 {
                v /= base;
                i += 1;
            }
            (v, i)
        }
    }
}

/// Format a byte count as iperf3's "Transfer" column (1024-based).
pub fn format_bytes(bytes: f64, fmt: Format) -> String {
    const UNITS: [&str; 5] = ["Bytes", "KBytes", "MBytes", "GBytes", "TBytes"];
    let (v, i) = scale_to(bytes, 1024.0, fmt, 1024.0);
    Scaled { v, unit: UNITS[i] }.to_string()
}

/// Format a rate in bits/s as iperf3's "Bitrate" column (1000-based bits, or
/// 1024-based bytes per second when `-f` asked for an upper-case unit).
pub fn format_rate(bits_per_second: f64, fmt: Format) -> String {
    match fmt {
        Format::Fixed(c) if c.is_ascii_uppercase() => {
            const UNITS: [&str; 5] = [
                "Bytes/sec",
                "KBytes/sec",
                "MBytes/sec",
                "GBytes/sec",
                "TBytes/sec",
            ];
            let (v, i) = scale_to(bits_per_second / 8.0, 1024.0, fmt, 1024.0);
            Scaled { v, unit: UNITS[i] }.to_string()
        }
        _ => {
            const UNITS: [&str; 5] = [
                "bits/sec",
                "Kbits/sec",
                "Mbits/sec",
                "Gbits/sec",
                "Tbits/sec",
            ];
            let (v, i) = scale_to(bits_per_second, 1000.0, fmt, 1000.0);
            Scaled { v, unit: UNITS[i] }.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_iperf3_quantities() {
        assert_eq!(parse_bytes("128K"), Ok(131072));
        assert_eq!(parse_bytes("1m"), Ok(1 << 20));
        assert_eq!(parse_bytes("1500"), Ok(1500));
        assert_eq!(parse_rate("10M"), Ok(10_000_000));
        assert_eq!(parse_rate("1.5G"), Ok(1_500_000_000));
        assert_eq!(parse_rate_burst("100M/32"), Ok((100_000_000, Some(32))));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("-1M").is_err());
        assert!(parse_rate("10X").is_err());
        assert!(parse_rate("").is_err());
        assert!(parse_rate_burst("1M/x").is_err());
    }

    #[test]
    fn formats_like_iperf3() {
        assert_eq!(
            format_bytes(1_073_741_824.0 * 3.5, Format::Auto),
            "3.50 GBytes"
        );
        assert_eq!(format_bytes(12.0 * 1048576.0, Format::Auto), "12.0 MBytes");
        assert_eq!(format_bytes(0.0, Format::Auto), "0.00 Bytes");
        assert_eq!(format_rate(29.8e9, Format::Auto), "29.8 Gbits/sec");
        assert_eq!(format_rate(1_048_576.0, Format::Auto), "1.05 Mbits/sec");
        assert_eq!(format_rate(943e6, Format::Auto), " 943 Mbits/sec");
        assert_eq!(format_rate(1e9, Format::Fixed('m')), "1000 Mbits/sec");
        assert_eq!(
            format_rate(8.0 * 1048576.0, Format::Fixed('M')),
            "1.00 MBytes/sec"
        );
    }

    #[test]
    fn format_flag() {
        assert_eq!(Format::parse("g"), Ok(Format::Fixed('g')));
        assert!(Format::parse("x").is_err());
    }
}
