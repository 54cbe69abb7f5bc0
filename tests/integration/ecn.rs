//! ECN end to end (issue 23 items 5-7, docs/ecn.md): the codepoint `--ecn` puts on
//! UDP datagrams arrives and is counted per codepoint by the receiver, per interval and
//! in the end summary, whichever side receives; the DSCP beside it is kept.

use crate::support::*;

/// The receiver's ECN counts in an interval row or an end object.
fn ecn_of(v: &serde_json::Value) -> Option<(u64, u64, u64, u64)> {
    let e = v.get("ecn")?;
    let n = |k: &str| e[k].as_u64().unwrap_or(u64::MAX);
    Some((n("not_ect"), n("ect1"), n("ect0"), n("ce")))
}

#[test]
fn upload_ect1_arrives_as_ect1_and_the_server_sends_its_counts_back() {
    let port = free_port();
    let (_srv, _out) = netmeter_server(port, &["-1"]);
    let v = client_json(
        port,
        &[
            "-u", "-b", "2M", "-t", "1", "--dscp", "af11", "--ecn", "ect1",
        ],
    );
    assert_eq!(v["start"]["test_start"]["tos"], 0x29, "{v}");
    let udp = &v["end"]["streams"][0]["udp"];
    let end = &udp["netmeter"];
    // The datagrams that arrived, as the server's results told the client.
    let packets = udp["packets"].as_u64().unwrap_or(0) - udp["lost_packets"].as_u64().unwrap_or(0);
    assert!(packets > 0, "{udp}");
    // Every datagram the server counted arrived ECT(1); none lost its mark.
    assert_eq!(ecn_of(end), Some((0, packets, 0, 0)), "{end}");
    assert_eq!(end["ecn"]["ect1_percent"], 100.0, "{end}");
}

#[test]
fn reverse_ect0_is_counted_per_interval_by_the_client() {
    let port = free_port();
    let (_srv, _out) = netmeter_server(port, &["-1"]);
    let v = client_json(port, &["-u", "-b", "2M", "-t", "2", "-R", "--ecn", "ect0"]);
    let mut sum = 0;
    for iv in v["intervals"].as_array().expect("intervals") {
        let row = &iv["streams"][0];
        let udp = &row["netmeter"];
        // Every row has counts; each interval's ECT(0) count is its datagrams.
        let got = ecn_of(udp).unwrap_or_else(|| panic!("no ecn in {row}"));
        let received =
            row["packets"].as_u64().unwrap_or(0) - row["lost_packets"].as_u64().unwrap_or(0);
        assert_eq!(got, (0, 0, received, 0), "{row}");
        sum += got.2;
    }
    let end = &v["end"]["streams"][0]["udp"]["netmeter"];
    assert_eq!(ecn_of(end).map(|e| e.2), Some(sum), "{end}");
    assert!(sum > 0, "{v}");
}

#[test]
fn unmarked_datagrams_count_as_not_ect_and_keep_iperf3s_columns() {
    let port = free_port();
    let (_srv, _out) = netmeter_server(port, &[]);
    let out = client(port, &["-u", "-b", "1M", "-t", "1", "-R"]);
    assert!(out.status.success(), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    // No marks: the rows stay in iperf3's layout.
    assert!(!text.contains("ECN"), "{text}");
    let v = client_json(port, &["-u", "-b", "1M", "-t", "1", "-R"]);
    let end = &v["end"]["streams"][0]["udp"]["netmeter"];
    let packets = end["receiver_packets"].as_u64().expect("receiver_packets");
    assert_eq!(ecn_of(end), Some((packets, 0, 0, 0)), "{end}");
}
