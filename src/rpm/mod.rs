//! The IETF responsiveness test (draft-ietf-ippm-responsiveness): HTTP/2 over TLS, on
//! its own tokio runtime created where the subcommand starts; nothing else in netmeter
//! is async. `server*` and `tls` are `netmeter rpm-server` (docs/rpm-server.md).

pub mod server;
pub mod server_body;
pub mod server_config;
pub mod server_policy;
pub mod tls;
