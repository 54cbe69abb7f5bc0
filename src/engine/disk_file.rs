//! `-F FILE`: one file per test, shared by every stream of this side.
//!
//! iperf3 (`iperf_new_stream`) opens the file once per stream, a receiver with `O_TRUNC`,
//! and each stream reads or writes it from offset 0 through its own descriptor: with
//! `-P 4` a receiving side's four streams truncate and overwrite one another's bytes
//! (8,000,000 bytes received left a 4,063,232-byte file), and a sending side's streams
//! each send the file's beginning again. netmeter opens the file once per test instead
//! and hands out offsets: each read or write claims the next span of the file
//! ([`DiskFile::read_next`], [`DiskFile::write_next`], positional I/O, no lock), so a
//! sending side sends every byte of the file exactly once and a receiving side keeps
//! every byte it received, never one stream's bytes over another's. With one stream the
//! received file is the sent file; with several, each stream's spans land in the order
//! they arrived, so the file holds every byte but not in the sender's order (iperf3's
//! protocol carries no offsets).
//!
//! A side that both sends and receives (`--bidir`) uses the file as its source only:
//! writing what arrives into the file being sent would destroy it.
//!
//! A server writes at most `--server-max-file-size` bytes (default 1 GiB): a client
//! chooses how much it sends, and a server's disk is not its to fill. Past the cap the
//! test goes on and is measured as before; what arrives is no longer written, and the
//! server logs it once ([`DiskFile::capped`]).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The server's default for `--server-max-file-size`: 1 GiB.
pub const DEFAULT_SERVER_MAX_FILE_BYTES: u64 = 1 << 30;

/// What this side does with the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Its bytes are sent.
    Source,
    /// What arrives is written to it (created or truncated once, at the test's start),
    /// up to `max_bytes` when given.
    Sink { max_bytes: Option<u64> },
}

/// The file of one test on one side.
#[derive(Debug)]
pub struct DiskFile {
    path: PathBuf,
    file: File,
    role: Use,
    /// The next offset not yet claimed by a stream.
    next: AtomicU64,
    /// A sink stopped writing at its cap.
    capped: AtomicBool,
}

/// How much of a claim of `len` bytes at `offset` fits under `max_bytes`.
fn under_cap(offset: u64, len: usize, max_bytes: Option<u64>) -> usize {
    match max_bytes {
        Some(max) => max.saturating_sub(offset).min(len as u64) as usize,
        None => len,
    }
}

impl DiskFile {
    /// Open `path` for `role`: read-only for a source, created or truncated for a sink.
    pub fn open(path: &Path, role: Use) -> io::Result<DiskFile> {
        let file = match role {
            Use::Source => File::open(path),
            Use::Sink { .. } => File::create(path),
        }
        .map_err(|e| {
            let what = match role {
                Use::Source => "read",
                Use::Sink { .. } => "write",
            };
            io::Error::new(
                e.kind(),
                format!("cannot {what} -F file {}: {e}", path.display()),
            )
        })?;
        Ok(DiskFile {
            path: path.to_path_buf(),
            file,
            role,
            next: AtomicU64::new(0),
            capped: AtomicBool::new(false),
        })
    }

    /// The file's name as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this side sends the file's bytes (else it writes what arrives).
    pub fn is_source(&self) -> bool {
        self.role == Use::Source
    }

    /// A source: claim the next `buf.len()` bytes of the file and read them into
    /// `buf`. Returns how many were read: fewer at the end of the file, 0 past it.
    pub fn read_next(&self, buf: &mut [u8]) -> io::Result<usize> {
        let offset = self.next.fetch_add(buf.len() as u64, Ordering::Relaxed);
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    /// A sink: write `data` at the next unclaimed offset, or as much of it as the cap
    /// leaves room for. Returns the bytes written (0 once the cap is reached).
    pub fn write_next(&self, data: &[u8]) -> io::Result<usize> {
        let max_bytes = match self.role {
            Use::Sink { max_bytes } => max_bytes,
            Use::Source => return Ok(0),
        };
        let offset = self.next.fetch_add(data.len() as u64, Ordering::Relaxed);
        let n = under_cap(offset, data.len(), max_bytes);
        if n < data.len() {
            self.capped.store(true, Ordering::Relaxed);
        }
        if n > 0 {
            self.file.write_all_at(&data[..n], offset)?;
        }
        Ok(n)
    }

    /// A sink that stopped writing at its cap: the cap.
    pub fn capped(&self) -> Option<u64> {
        match self.role {
            Use::Sink { max_bytes } if self.capped.load(Ordering::Relaxed) => max_bytes,
            _ => None,
        }
    }

    /// The file's size now (iperf3's `fstat` of the open file for its summary).
    pub fn size(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("nm-disk-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    #[test]
    fn the_cap_cuts_a_claim_and_stops_the_rest() {
        assert_eq!(under_cap(0, 100, None), 100);
        assert_eq!(under_cap(0, 100, Some(1000)), 100);
        assert_eq!(under_cap(950, 100, Some(1000)), 50);
        assert_eq!(under_cap(1000, 100, Some(1000)), 0);
        assert_eq!(under_cap(5000, 100, Some(1000)), 0);
        assert_eq!(under_cap(0, 100, Some(0)), 0);
    }

    #[test]
    fn streams_writing_at_once_keep_every_byte() {
        let p = temp("sink");
        let f = Arc::new(DiskFile::open(&p, Use::Sink { max_bytes: None }).unwrap());
        let threads: Vec<_> = (0..4u8)
            .map(|i| {
                let f = f.clone();
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        assert_eq!(f.write_next(&[i; 1000]).unwrap(), 1000);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let data = std::fs::read(&p).unwrap();
        assert_eq!(data.len(), 400_000);
        for i in 0..4u8 {
            assert_eq!(data.iter().filter(|&&b| b == i).count(), 100_000);
        }
        assert_eq!(f.capped(), None);
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn a_sink_stops_at_its_cap_and_says_so() {
        let p = temp("capped");
        let f = DiskFile::open(
            &p,
            Use::Sink {
                max_bytes: Some(2500),
            },
        )
        .unwrap();
        assert_eq!(f.write_next(&[1; 1000]).unwrap(), 1000);
        assert_eq!(f.capped(), None);
        assert_eq!(f.write_next(&[2; 1000]).unwrap(), 1000);
        assert_eq!(f.write_next(&[3; 1000]).unwrap(), 500);
        assert_eq!(f.write_next(&[4; 1000]).unwrap(), 0);
        assert_eq!(f.capped(), Some(2500));
        assert_eq!(f.size().unwrap(), 2500);
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn a_source_hands_each_byte_out_once() {
        let p = temp("source");
        let content: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &content).unwrap();
        // A sink opened by mistake on the same name would have truncated it.
        let f = Arc::new(DiskFile::open(&p, Use::Source).unwrap());
        assert!(f.is_source());
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let f = f.clone();
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    let mut buf = [0u8; 700];
                    loop {
                        let n = f.read_next(&mut buf).unwrap();
                        if n == 0 {
                            break got;
                        }
                        got.push(buf[..n].to_vec());
                    }
                })
            })
            .collect();
        let total: usize = threads
            .into_iter()
            .map(|t| t.join().unwrap().iter().map(Vec::len).sum::<usize>())
            .sum();
        assert_eq!(total, content.len());
        std::fs::remove_file(&p).unwrap();
    }
}
