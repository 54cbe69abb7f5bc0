//! A sweep's grid (pure): the swept options and their values, the points in order, and
//! the client arguments each setting stands for. Its own module because the sweep's run
//! ([`super::sweep`]), its charts ([`super::sweep_plot`]) and its CSV rows
//! ([`super::csv`]) all read it, and none of them should import another for it.

use serde::Serialize;
use std::ffi::OsString;

/// Sweep-only: `--proto tcp,udp` runs each point over TCP and over UDP (`-u`). (`-u`
/// itself takes no value, so it cannot hold a list.)
pub const PROTO: &str = "--proto";

/// One swept option and its values, in the order given.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Swept {
    /// The short flag, e.g. `-P`.
    pub flag: String,
    pub values: Vec<String>,
}

/// One grid point's settings: (short flag, value) per swept option.
pub type Settings = Vec<(String, String)>;

/// The grid in order: the last option varies fastest. Each point: (flag, value) pairs.
pub fn grid(swept: &[Swept]) -> Vec<Settings> {
    let mut points: Vec<Settings> = vec![Vec::new()];
    for s in swept {
        points = points
            .into_iter()
            .flat_map(|p| {
                s.values.iter().map(move |v| {
                    let mut q = p.clone();
                    q.push((s.flag.clone(), v.clone()));
                    q
                })
            })
            .collect();
    }
    points
}

/// The client arguments one swept setting stands for: `-P 4`, or for `--proto`
/// nothing (TCP) or `-u`.
pub fn point_args(flag: &str, value: &str) -> Vec<OsString> {
    match (flag, value.trim()) {
        (PROTO, "udp") => vec!["-u".into()],
        (PROTO, _) => Vec::new(),
        _ => vec![flag.into(), value.into()],
    }
}

/// A point's settings as the user would type them: `-P 1 -l 8K`.
pub fn settings_text(point: &[(String, String)]) -> String {
    point
        .iter()
        .map(|(f, v)| format!("{f} {v}"))
        .collect::<Vec<_>>()
        .join(" ")
}
