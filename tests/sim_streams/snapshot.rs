//! Outputs pinned in `tests/sim_streams/snapshots/`: a change in any machine's
//! decisions shows as a changed table. `NETMETER_UPDATE_SNAPSHOTS=1` rewrites them
//! (as for the renderers' snapshots in `report::snapshots`).

use std::path::PathBuf;

/// Compare `actual` with the pinned file `name`, or rewrite it when asked to.
pub fn check(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sim_streams/snapshots")
        .join(name);
    if std::env::var_os("NETMETER_UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().expect("a directory")).expect("snapshot dir");
        std::fs::write(&path, actual).expect("snapshot written");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{name}: {e} (NETMETER_UPDATE_SNAPSHOTS=1 writes it)"));
    if expected != actual {
        panic!("{name} differs from its snapshot:\n--- expected\n{expected}\n--- actual\n{actual}");
    }
}
