//! What the user typed for multicast, resolved: `-B GROUP[%DEV][,GROUP[%DEV]...]` (one
//! or several groups, each on an interface or on the route's), `-H/--ssm-host SOURCE`
//! (source-specific), and the sender's `-c GROUP[%DEV]`. Pure: no socket, no lookup.

use std::net::IpAddr;

/// One group to join or send to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub addr: IpAddr,
    /// The interface (`%DEV`); `None`: the route's.
    pub dev: Option<String>,
}

impl Group {
    /// The group in a source-specific range: 232.0.0.0/8 (RFC 4607) or ff3x::/32
    /// (RFC 3306's SSM prefix, `ff3x::/96` within it).
    pub fn is_ssm_range(&self) -> bool {
        match self.addr {
            IpAddr::V4(a) => a.octets()[0] == 232,
            IpAddr::V6(a) => a.segments()[0] & 0xfff0 == 0xff30 && a.segments()[1] == 0,
        }
    }
}

/// Whether `s` (as `-B` or `-c` take it) names a multicast address, `%DEV` or not.
pub fn is_multicast(s: &str) -> bool {
    s.split(',').next().is_some_and(|first| {
        let addr = first.split('%').next().unwrap_or(first);
        let addr = addr.trim_start_matches('[').trim_end_matches(']');
        addr.parse::<IpAddr>().is_ok_and(|a| a.is_multicast())
    })
}

/// One `GROUP[%DEV]`.
pub fn parse_group(s: &str) -> Result<Group, String> {
    let (addr, dev) = match s.split_once('%') {
        Some((a, d)) => (a, Some(d)),
        None => (s, None),
    };
    let addr = addr.trim_start_matches('[').trim_end_matches(']');
    let ip: IpAddr = addr
        .parse()
        .map_err(|_| format!("'{s}' is not a multicast group address"))?;
    if !ip.is_multicast() {
        return Err(format!(
            "'{addr}' is not a multicast group (224.0.0.0/4 or ff00::/8)"
        ));
    }
    if let Some(d) = dev
        && (d.is_empty() || d.len() >= 16 || d.contains(['/', ' ', ',']))
    {
        return Err(format!("'{d}' is not a network interface name"));
    }
    Ok(Group {
        addr: ip,
        dev: dev.map(str::to_string),
    })
}

/// The most groups one receiver joins.
pub const MAX_GROUPS: usize = 64;

/// `-B G1[%DEV],G2[%DEV]...` and `-H SOURCE`: the receiver's groups, checked together
/// (one address family for the source and its groups, no group twice).
pub fn parse_groups(
    list: &str,
    source: Option<&str>,
) -> Result<(Vec<Group>, Option<IpAddr>), String> {
    let groups: Vec<Group> = list
        .split(',')
        .map(str::trim)
        .map(parse_group)
        .collect::<Result<_, _>>()?;
    if groups.len() > MAX_GROUPS {
        return Err(format!(
            "-B names {} groups; one receiver joins at most {MAX_GROUPS}",
            groups.len()
        ));
    }
    for (i, g) in groups.iter().enumerate() {
        if groups[..i].iter().any(|h| h.addr == g.addr) {
            return Err(format!("-B names group {} twice", g.addr));
        }
    }
    let source = source
        .map(|s| {
            s.parse::<IpAddr>()
                .ok()
                .filter(|a| !a.is_multicast() && !a.is_unspecified())
                .ok_or_else(|| format!("--ssm-host needs the sender's unicast address, not '{s}'"))
        })
        .transpose()?;
    if let Some(src) = source
        && let Some(g) = groups.iter().find(|g| g.addr.is_ipv4() != src.is_ipv4())
    {
        return Err(format!(
            "--ssm-host {src} and group {} are of different address families",
            g.addr
        ));
    }
    Ok((groups, source))
}

/// The most receivers one sender asks with `--receivers`.
pub const MAX_RECEIVERS: usize = 64;

/// One receiver of `--receivers`: the name as the user gave it (its row's label), and
/// the netmeter server to ask: host and control port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiverHost {
    pub name: String,
    pub host: String,
    pub port: u16,
}

fn parse_receiver(s: &str, default_port: u16) -> Result<ReceiverHost, String> {
    let bad = || format!("--receivers: '{s}' is not HOST or HOST:PORT");
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        // [V6ADDR] or [V6ADDR]:PORT
        let (h, after) = rest.split_once(']').ok_or_else(bad)?;
        match after {
            "" => (h, None),
            p => (h, Some(p.strip_prefix(':').ok_or_else(bad)?)),
        }
    } else if s.matches(':').count() > 1 {
        (s, None) // a bare IPv6 address: the default port
    } else {
        match s.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    if host.is_empty() || host.len() > 253 || host.contains(char::is_whitespace) {
        return Err(bad());
    }
    let port = match port {
        None => default_port,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(format!(
                    "--receivers: '{p}' in '{s}' is not a port (1 to 65535)"
                ));
            }
        },
    };
    Ok(ReceiverHost {
        name: s.to_string(),
        host: host.to_string(),
        port,
    })
}

/// `--receivers H1,H2[:PORT],[V6]:PORT...`: each a netmeter server (at `default_port`,
/// the client's `-p`, unless given), at most [`MAX_RECEIVERS`], none twice.
pub fn parse_receivers(list: &str, default_port: u16) -> Result<Vec<ReceiverHost>, String> {
    let items: Vec<&str> = list.split(',').map(str::trim).collect();
    if items.len() > MAX_RECEIVERS {
        return Err(format!(
            "--receivers names {} hosts; one sender asks at most {MAX_RECEIVERS}",
            items.len()
        ));
    }
    let mut out: Vec<ReceiverHost> = Vec::with_capacity(items.len());
    for s in items {
        if s.is_empty() {
            return Err(format!("--receivers: '{list}' has an empty entry"));
        }
        let r = parse_receiver(s, default_port)?;
        if out.iter().any(|o| o.host == r.host && o.port == r.port) {
            return Err(format!("--receivers names {s} twice"));
        }
        out.push(r);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receivers_are_hosts_with_ports() {
        let r =
            parse_receivers("h1, 10.0.0.2:5202,[fd00::3]:5203,fd00::4,[fd00::5]", 5201).unwrap();
        let got: Vec<(&str, &str, u16)> = r
            .iter()
            .map(|r| (r.name.as_str(), r.host.as_str(), r.port))
            .collect();
        assert_eq!(
            got,
            [
                ("h1", "h1", 5201),
                ("10.0.0.2:5202", "10.0.0.2", 5202),
                ("[fd00::3]:5203", "fd00::3", 5203),
                ("fd00::4", "fd00::4", 5201),
                ("[fd00::5]", "fd00::5", 5201),
            ]
        );
    }

    #[test]
    fn receiver_mistakes_name_the_option() {
        for (list, says) in [
            ("h1,,h2", "empty entry"),
            ("h1:0", "not a port"),
            ("h1:http", "not a port"),
            ("[fd00::1", "not HOST or HOST:PORT"),
            ("[fd00::1]5201", "not HOST or HOST:PORT"),
            ("h1,h1:5201", "twice"),
            (":5201", "not HOST or HOST:PORT"),
        ] {
            let e = parse_receivers(list, 5201).unwrap_err();
            assert!(
                e.starts_with("--receivers") && e.contains(says),
                "{list}: {e}"
            );
        }
        let many = vec!["h"; MAX_RECEIVERS + 1]
            .iter()
            .enumerate()
            .map(|(i, h)| format!("{h}{i}"))
            .collect::<Vec<_>>()
            .join(",");
        assert!(
            parse_receivers(&many, 5201)
                .unwrap_err()
                .contains("at most 64")
        );
    }

    #[test]
    fn groups_devices_and_lists() {
        let (g, s) = parse_groups("239.1.1.1%eth0, 239.1.1.2", None).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].dev.as_deref(), Some("eth0"));
        assert_eq!(g[1].dev, None);
        assert_eq!(s, None);
        let (g, s) = parse_groups("ff3e::8000:1%veth1", Some("fd00::1")).unwrap();
        assert!(g[0].is_ssm_range());
        assert_eq!(s, Some("fd00::1".parse().unwrap()));
        assert!(parse_group("232.1.1.1").unwrap().is_ssm_range());
        assert!(!parse_group("239.1.1.1").unwrap().is_ssm_range());
    }

    #[test]
    fn mistakes_are_named() {
        assert!(
            parse_group("10.0.0.1")
                .unwrap_err()
                .contains("not a multicast group")
        );
        assert!(parse_group("nonsense").is_err());
        assert!(parse_group("239.1.1.1%").is_err());
        assert!(
            parse_groups("239.1.1.1,239.1.1.1", None)
                .unwrap_err()
                .contains("twice")
        );
        assert!(
            parse_groups("232.1.1.1", Some("fd00::1"))
                .unwrap_err()
                .contains("families")
        );
        assert!(parse_groups("232.1.1.1", Some("239.0.0.1")).is_err());
    }

    #[test]
    fn multicast_is_told_from_unicast() {
        assert!(is_multicast("239.1.1.1"));
        assert!(is_multicast("ff15::1%eth0"));
        assert!(is_multicast("232.1.1.1,232.1.1.2"));
        assert!(!is_multicast("10.0.0.1"));
        assert!(!is_multicast("example.com"));
    }
}
