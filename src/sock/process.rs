//! Process-wide platform calls: CPU usage, random bytes, host description, CPU
//! affinity, glibc's malloc arenas and trimming, daemonizing, and the stop-signal
//! handler. None of them touches a socket; they sit here because they are the rest of
//! netmeter's `unsafe`.

use super::check;
use crate::stats::CpuSample;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Instant;

/// Process CPU (user, system) and a monotonic wall time.
pub fn cpu_sample(origin: Instant) -> CpuSample {
    // SAFETY: rusage is plain old data; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: &mut ru is a valid pointer to an rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let (user_s, system_s) = if rc == 0 {
        (tv(ru.ru_utime), tv(ru.ru_stime))
    } else {
        (0.0, 0.0)
    };
    CpuSample {
        wall_s: origin.elapsed().as_secs_f64(),
        user_s,
        system_s,
    }
}

/// CPU time the calling thread has used so far (`CLOCK_THREAD_CPUTIME_ID`), in seconds;
/// 0 if the clock cannot be read.
pub fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: &mut ts is a valid timespec for clock_gettime to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// The memory page size in bytes (4096 if sysconf cannot tell).
pub fn page_size() -> u64 {
    // SAFETY: sysconf takes a constant and touches no memory of ours.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 { n as u64 } else { 4096 }
}

/// Fill `buf` from the kernel's random source.
pub fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the pointer and length describe the unfilled tail of `buf`.
        let n = unsafe {
            libc::getrandom(
                buf[done..].as_mut_ptr() as *mut libc::c_void,
                buf.len() - done,
                0,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        done += n as usize;
    }
    Ok(())
}

/// `strftime(3)` of the local time `epoch_secs` (`--timestamps=FORMAT`, as iperf3
/// formats it: the C library's own conversions and time zone). Empty when the format
/// yields nothing or more than 512 bytes.
pub fn local_time_text(format: &str, epoch_secs: i64) -> String {
    let Ok(fmt) = std::ffi::CString::new(format) else {
        return String::new();
    };
    let t: libc::time_t = epoch_secs as libc::time_t;
    // SAFETY: tm is plain old data; localtime_r fills it from the valid &t.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call; localtime_r is thread-safe.
    if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
        return String::new();
    }
    let mut buf = [0u8; 512];
    // SAFETY: buf's pointer and length bound the output; fmt is NUL-terminated; tm is
    // initialised. strftime returns the bytes written, without the NUL.
    let n = unsafe {
        libc::strftime(
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
            fmt.as_ptr(),
            &tm,
        )
    };
    String::from_utf8_lossy(&buf[..n.min(buf.len())]).into_owned()
}

/// `uname -a`-like text for `start.system_info`.
pub fn system_info() -> String {
    // SAFETY: utsname is plain old data; uname fills it with NUL-terminated strings.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: &mut u is a valid pointer.
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    let f = |a: &[libc::c_char]| {
        let bytes: Vec<u8> = a
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!(
        "{} {} {} {} {}",
        f(&u.sysname),
        f(&u.nodename),
        f(&u.release),
        f(&u.version),
        f(&u.machine)
    )
}

/// Pin the calling thread (and the threads it creates afterwards) to one CPU (`-A`).
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain old data; CPU_ZERO/CPU_SET only write inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "CPU number too large",
        ));
    }
    // SAFETY: cpu is below CPU_SETSIZE, checked above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; set is a valid cpu_set_t of the given size.
    check(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) })
        .map(|_| ())
}

/// Make every thread allocate from glibc's main heap (`M_ARENA_MAX` = 1). By default each
/// new thread may get a malloc arena of its own (up to 8 per CPU); `malloc_trim` gives
/// back their free chunks but not the top of their heaps, so after a `-P 128` test each of
/// 15 arenas kept 130 KiB or more resident (2–4.5 MiB in all) for good. Data threads allocate
/// their buffers when they start; the only per-batch allocation (a UDP sender's list of at
/// most 32 slices) comes from glibc's per-thread cache without the arena lock, so sharing
/// one arena costs no throughput. Call before spawning threads: arenas that already exist
/// stay in use.
pub fn use_one_malloc_arena() {
    // SAFETY: mallopt only sets a glibc tunable; M_ARENA_MAX takes any positive value.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// A zeroed, page-aligned buffer of its own anonymous `mmap`, for a stream's reads: the
/// kernel's copy to user space runs far faster into a page-aligned destination, and the
/// mapping is exactly the buffer's pages (a 128 KiB heap block from glibc's `mmap` path
/// starts 16 bytes into its mapping, and a page-aligned window of it keeps one more page
/// resident). Pages become resident as they are first written, as with any anonymous
/// memory; the mapping goes when the buffer is dropped.
pub struct PageBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone (no aliasing pointers are kept), so
// moving it to another thread is as safe as moving a Vec.
unsafe impl Send for PageBuf {}

impl PageBuf {
    /// A buffer of `len` bytes (none mapped for 0).
    pub fn new(len: usize) -> io::Result<PageBuf> {
        if len == 0 {
            return Ok(PageBuf {
                ptr: std::ptr::NonNull::dangling().as_ptr(),
                len: 0,
            });
        }
        // SAFETY: an anonymous private mapping with no address hint touches no memory of
        // ours; the result is checked against MAP_FAILED before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(PageBuf { ptr: p.cast(), len })
    }
}

impl std::ops::Deref for PageBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` is a live mapping of `len` readable bytes (or dangling with len 0),
        // zero-filled by the kernel, borrowed for as long as `self` is.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl std::ops::DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes this the only borrow.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: `ptr`/`len` are exactly the mapping `new` made, unmapped once here.
            unsafe {
                libc::munmap(self.ptr.cast(), self.len);
            }
        }
    }
}

/// Give freed heap memory back to the kernel. A test's stream threads allocate their
/// buffers on the heap; glibc keeps freed pages after the threads end, so a
/// long-running server would stay at its high-water mark.
pub fn release_free_memory() {
    // SAFETY: malloc_trim only walks glibc's own heap bookkeeping.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Detach from the terminal (`-D`). Must run before any thread is spawned.
pub fn daemonize() -> io::Result<()> {
    // SAFETY: called while the process is single-threaded; daemon() forks and the
    // parent exits inside libc.
    check(unsafe { libc::daemon(1, 0) }).map(|_| ())
}

/// The signal that asked this process to stop (SIGINT, SIGTERM or SIGHUP), 0 if none.
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);
/// A SIGHUP arrived since [`take_hangup`] last looked (after [`catch_hangup`]).
static HANGUP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(sig: libc::c_int) {
    // Only an atomic store (async-signal-safe). A second signal while the first is
    // still being handled means the user wants out now: leave without cleanup.
    if STOP_SIGNAL.swap(sig, Ordering::SeqCst) != 0 {
        // SAFETY: _exit is async-signal-safe and takes no pointers.
        unsafe { libc::_exit(1) }
    }
}

extern "C" fn on_hangup(_sig: libc::c_int) {
    // Only an atomic store (async-signal-safe).
    HANGUP.store(true, Ordering::SeqCst);
}

/// Install `handler` for each of `signals`, with SA_RESTART.
fn install(signals: &[libc::c_int], handler: extern "C" fn(libc::c_int)) -> io::Result<()> {
    for &sig in signals {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the handler
        // is an `extern "C" fn(c_int)` that only touches an atomic; the old action is not
        // asked for (null).
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        check(rc)?;
    }
    Ok(())
}

/// Catch SIGINT, SIGTERM and SIGHUP (iperf3 stops on the same three): the handler only
/// records the signal; the engine polls [`stop_signal`] at its bounded waits, ends the
/// test cleanly and reports what it measured. SA_RESTART keeps the data threads' blocking
/// calls from failing with EINTR; the control waits use ppoll, which returns at once.
pub fn catch_stop_signals() -> io::Result<()> {
    install(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP], on_stop_signal)
}

/// From now on SIGHUP does not stop the process: it is recorded for [`take_hangup`], as
/// daemons take it (the server reopens its audit log). Call after [`catch_stop_signals`].
pub fn catch_hangup() -> io::Result<()> {
    install(&[libc::SIGHUP], on_hangup)
}

/// Whether a SIGHUP arrived since the last call (see [`catch_hangup`]).
pub fn take_hangup() -> bool {
    HANGUP.swap(false, Ordering::SeqCst)
}

/// The stop signal received so far, if any (see [`catch_stop_signals`]).
pub fn stop_signal() -> Option<i32> {
    match STOP_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Ask this process's running tests to stop as a stop signal `sig` would: for a library
/// caller with its own interrupt (the Python package's Ctrl-C, whose handler is Python's,
/// not [`catch_stop_signals`]'s). The engine sees it at its next bounded wait.
pub fn request_stop(sig: i32) {
    STOP_SIGNAL.store(sig, Ordering::SeqCst);
}

/// Forget a stop request or signal, so that the next test runs: for a library caller that
/// goes on after an interrupt (the command line exits instead). A test still running is
/// no longer asked to stop.
pub fn clear_stop() {
    STOP_SIGNAL.store(0, Ordering::SeqCst);
}

/// Read a password from the terminal on stdin with echo off (iperf3's `iperf_getpass`):
/// `prompt` goes to stderr, the line ends at the first `\r` or `\n`. Fails when stdin is
/// not a terminal.
pub fn read_password(prompt: &str) -> io::Result<String> {
    use std::io::{BufRead, Write};
    let fd = libc::STDIN_FILENO;
    // SAFETY: termios is plain old data; tcgetattr fills it or fails.
    let mut old: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: fd is stdin, &mut old a valid termios pointer.
    check(unsafe { libc::tcgetattr(fd, &mut old) })?;
    let mut quiet = old;
    quiet.c_lflag &= !libc::ECHO;
    // SAFETY: fd is stdin, &quiet a valid termios.
    check(unsafe { libc::tcsetattr(fd, libc::TCSAFLUSH, &quiet) })?;
    let mut err = io::stderr();
    let _ = write!(err, "{prompt}");
    let _ = err.flush();
    let mut line = String::new();
    let read = io::stdin().lock().read_line(&mut line);
    // SAFETY: fd is stdin, &old the settings read above.
    unsafe { libc::tcsetattr(fd, libc::TCSAFLUSH, &old) };
    let _ = writeln!(err);
    read?;
    let end = line.find(['\r', '\n']).unwrap_or(line.len());
    line.truncate(end);
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_buf_is_aligned_zeroed_and_writable() {
        let mut b = PageBuf::new(128 * 1024 + 5).unwrap();
        assert_eq!(b.len(), 128 * 1024 + 5);
        assert_eq!(b.as_ptr() as u64 % page_size(), 0);
        assert!(b.iter().all(|&x| x == 0));
        b[128 * 1024 + 4] = 7;
        assert_eq!(b[128 * 1024 + 4], 7);
        let moved = std::thread::spawn(move || b.len()).join().unwrap();
        assert_eq!(moved, 128 * 1024 + 5);
        assert!(PageBuf::new(0).unwrap().is_empty());
    }

    #[test]
    fn cpu_and_random() {
        let s = cpu_sample(Instant::now());
        assert!(s.user_s >= 0.0);
        let mut b = [0u8; 37];
        random_bytes(&mut b).unwrap();
        assert!(!system_info().is_empty());
    }

    #[test]
    fn thread_cpu_time_grows_with_work() {
        let before = thread_cpu_seconds();
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 30 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let used = thread_cpu_seconds() - before;
        // 30 ms of spinning; a busy machine may take some of it away, never add to it.
        assert!(used > 0.0 && used < 1.0, "{used}");
    }

    #[test]
    fn local_time_text_is_strftime() {
        // The epoch's year and seconds do not depend on the time zone's offset (< 1 day).
        let y = local_time_text("%Y", 86_400 * 365);
        assert_eq!(y, "1971");
        assert_eq!(local_time_text("%S|%%", 7), "07|%");
        // %c (iperf3's default) names a weekday and the year.
        let c = local_time_text("%c ", 1_700_000_000);
        assert!(c.contains("2023") && c.ends_with(' '), "{c}");
        assert_eq!(local_time_text("", 0), "");
        assert_eq!(local_time_text("a\0b", 0), "");
    }
}
