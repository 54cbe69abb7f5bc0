//! This host's ceilings: what, besides the network, can bound a test's figures (issue
//! 13). `facts` holds the values and the pure parsing of the kernel's text (sysfs,
//! procfs); `probe` reads them (through `sock` for getifaddrs and ethtool); `advice`
//! turns them into warnings with the command to run; `doctor` is `netmeter doctor`'s
//! document and text. Reports carry the same facts (`end.netmeter.host`), read once
//! a test has ended (`engine::test_run`).

pub mod advice;
pub mod doctor;
pub mod facts;
pub mod probe;
