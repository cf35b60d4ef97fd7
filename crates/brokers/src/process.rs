//! Process plumbing shared by managed brokers: pid files, ownership checks, detached spawn,
//! stopping, port probes, log tails and a lock against concurrent `up`/`down`.

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::thread;
use std::time::{Duration, Instant};

use crate::BrokerError;

/// How often to look again while waiting for a process to exit.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// The pid a pid file names, if it names one.
pub fn read_pid_file(path: &Path) -> Option<u32> {
    parse_pid(&fs::read_to_string(path).ok()?)
}

fn parse_pid(text: &str) -> Option<u32> {
    text.trim().parse().ok().filter(|&pid| pid > 0)
}

/// Writes the pid file atomically, so a concurrent reader never sees half a number.
pub fn write_pid_file(path: &Path, pid: u32) -> Result<(), BrokerError> {
    write_atomically(path, format!("{pid}\n").as_bytes())
}

/// Removes a pid file; one that is already gone is fine.
pub fn remove_pid_file(path: &Path) -> Result<(), BrokerError> {
    remove_if_present(path)
}

/// Removes a file; one that is already gone is fine.
pub fn remove_if_present(path: &Path) -> Result<(), BrokerError> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => {
            Err(BrokerError::io("removing", path)(error))
        }
        _ => Ok(()),
    }
}

/// Writes through a temporary file and a rename, so readers see the old or the new content.
pub fn write_atomically(path: &Path, content: &[u8]) -> Result<(), BrokerError> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = Path::new(&temporary);
    fs::write(temporary, content).map_err(BrokerError::io("writing", temporary))?;
    fs::rename(temporary, path).map_err(BrokerError::io("renaming to", path))
}

/// True when a `/proc/PID/cmdline` (NUL-separated arguments) contains every one of
/// `required` as a whole argument. This is what makes a pid "ours": a recycled pid, or
/// another broker started from a different folder, does not contain our configuration path.
pub fn cmdline_has_arguments(cmdline: &[u8], required: &[impl AsRef<OsStr>]) -> bool {
    let arguments: Vec<&[u8]> = cmdline.split(|&byte| byte == 0).collect();
    required
        .iter()
        .all(|wanted| arguments.contains(&wanted.as_ref().as_bytes()))
}

/// True when `pid` is a live (not zombie) process whose command line contains `required`.
pub fn is_ours(pid: u32, required: &[impl AsRef<OsStr>]) -> bool {
    // The command line first: read for every process when /proc is scanned.
    fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmdline| cmdline_has_arguments(&cmdline, required))
        && is_alive(pid)
}

/// The live process that is ours: the pid file's if it checks out, else one found by scanning
/// `/proc` (the pid file may have been lost, e.g. removed by hand while the broker ran).
pub fn find_ours(pid_file: &Path, required: &[impl AsRef<OsStr>]) -> Option<u32> {
    if let Some(pid) = read_pid_file(pid_file).filter(|&pid| is_ours(pid, required)) {
        return Some(pid);
    }
    fs::read_dir("/proc")
        .ok()?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|&pid| pid != std::process::id() && is_ours(pid, required))
}

/// True while `pid` exists and has not exited (a zombie has exited: it only waits to be
/// reaped). A process exits when its last thread does: a killed JVM's main thread is a zombie
/// while its hundreds of others still wind down, holding its files and listening ports, so
/// every thread is asked.
pub fn is_alive(pid: u32) -> bool {
    let running = |stat: &str| process_state(stat).is_some_and(|s| !matches!(s, 'Z' | 'X' | 'x'));
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks
        .filter_map(Result::ok)
        .any(|task| fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| running(&stat)))
}

/// Before a start: the pid file's process, when its main thread has exited while others still
/// wind down (a killed JVM, for up to seconds on a busy host), is waited for (at most
/// [`EXITING_WAIT`]). It has no command line left to tell whose it is, but still holds its
/// ports, so the start would find them taken.
pub fn wait_if_exiting(pid_file: &Path) {
    let Some(pid) = read_pid_file(pid_file) else {
        return;
    };
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    if process_state(&stat) == Some('Z') && is_alive(pid) {
        wait_for_exit(pid, EXITING_WAIT);
    }
}

/// How long a process that is exiting is waited for, after a SIGKILL too.
const EXITING_WAIT: Duration = Duration::from_secs(30);

/// The state letter of a `/proc/PID/stat` line. The command name in parentheses may itself
/// contain spaces and parentheses, so look after the last `)`.
fn process_state(stat: &str) -> Option<char> {
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// Reaps `pid` if it is a child of this process, so it does not linger as a zombie when the
/// same process that started the broker also stops it.
pub fn reap(pid: u32) {
    let mut status = 0;
    // SAFETY: waitpid with WNOHANG only inspects the child table; for a pid that is not our
    // child it fails with ECHILD, which is fine to ignore.
    unsafe {
        libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG);
    }
}

fn signal(pid: u32, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: kill has no memory-safety preconditions.
    if unsafe { libc::kill(pid as libc::pid_t, signal) } == 0 {
        return Ok(());
    }
    match io::Error::last_os_error() {
        // Exited between our check and the signal: that is what we wanted anyway.
        error if error.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        error => Err(error),
    }
}

/// Waits until `pid` has exited, reaping it if it is our child. False on timeout.
pub fn wait_for_exit(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        reap(pid);
        if !is_alive(pid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(POLL_INTERVAL);
    }
}

/// Sends SIGTERM, waits up to `grace` for a clean shutdown, then SIGKILL.
/// The caller has checked that `pid` is ours.
pub fn stop(broker: &'static str, pid: u32, grace: Duration) -> Result<(), BrokerError> {
    let signal_error = |source| BrokerError::Signal {
        broker,
        pid,
        source,
    };
    signal(pid, libc::SIGTERM).map_err(signal_error)?;
    if wait_for_exit(pid, grace) {
        return Ok(());
    }
    signal(pid, libc::SIGKILL).map_err(signal_error)?;
    // Every thread must end: a JVM's hundreds take a while on a busy host.
    if wait_for_exit(pid, EXITING_WAIT) {
        return Ok(());
    }
    Err(BrokerError::StopFailed {
        broker,
        pid,
        timeout: grace + EXITING_WAIT,
    })
}

/// Starts `command` in a session of its own with stdin from /dev/null: a Ctrl-C (SIGINT to
/// the terminal's foreground process group) or a closed terminal (SIGHUP) cannot reach it.
/// It starts in a cgroup of its own where the host allows ([`crate::cgroup`]).
pub fn spawn_detached(command: &mut Command) -> io::Result<Child> {
    command.stdin(std::process::Stdio::null());
    // Owned by the closure, so open for as long as the command (a second spawn of it joins
    // the same group).
    let group = crate::cgroup::new_node_group().map(std::os::fd::OwnedFd::from);
    // SAFETY: the closure runs between fork and exec and calls only async-signal-safe
    // functions (write, setsid, signal); it allocates nothing and takes no locks; the fd it
    // writes to is its own, open until the command is dropped.
    unsafe {
        command.pre_exec(move || {
            if let Some(fd) = &group {
                // "0": the writing process itself. A failure leaves it in the parent's group.
                libc::write(std::os::fd::AsRawFd::as_raw_fd(fd), b"0".as_ptr().cast(), 1);
            }
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            // An ignored signal stays ignored across exec. If our caller ignores SIGTERM or
            // SIGINT, the JVM would inherit that and skip its clean-shutdown hook.
            for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
                libc::signal(signal, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    command.spawn()
}

/// True when something accepts TCP connections on 127.0.0.1:`port`.
pub fn port_in_use(port: u16) -> bool {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&address, Duration::from_millis(500)).is_ok()
}

/// True when a broker could listen on 127.0.0.1:`port`: nothing accepts connections there and
/// binding it works (a listener on 0.0.0.0 or a dual-stack `[::]` also makes it unusable).
pub fn can_listen(port: u16) -> bool {
    // The probe listener closes at once; it never accepts a connection.
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() && !port_in_use(port)
}

/// Runs `command` to completion, but kills it after `timeout`. `None` when it timed out.
pub fn run_with_timeout(
    command: &mut Command,
    timeout: Duration,
) -> io::Result<Option<ExitStatus>> {
    let mut child = command.stdin(std::process::Stdio::null()).spawn()?;
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        thread::sleep(POLL_INTERVAL);
    }
}

/// Sends `command`'s stdout and stderr to the end of the file at `path`.
pub fn output_to(command: &mut Command, path: &Path) -> io::Result<()> {
    let log = OpenOptions::new().create(true).append(true).open(path)?;
    let again = log.try_clone()?;
    command.stdout(log).stderr(again);
    Ok(())
}

/// Keeps the previous content of a log as `NAME.1` (replacing an older one), so what a failed
/// start quotes is about that start only. A missing log is fine.
pub fn rotate_log(path: &Path) -> Result<(), BrokerError> {
    if path.exists() {
        let mut previous = path.as_os_str().to_owned();
        previous.push(".1");
        let previous = Path::new(&previous);
        fs::rename(path, previous).map_err(BrokerError::io("renaming to", previous))?;
    }
    Ok(())
}

/// The last `lines` lines of a log file, for error messages; a note if it cannot be read.
pub fn log_tail(path: &Path, lines: usize) -> String {
    // Read only the end: a broker log can be large, and the tail is what explains a failure.
    const MAX_BYTES: u64 = 64 * 1024;
    let read = || -> io::Result<String> {
        let mut file = File::open(path)?;
        let length = file.metadata()?.len();
        file.seek(SeekFrom::Start(length.saturating_sub(MAX_BYTES)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => last_lines(&text, lines),
        Err(error) => format!("(could not read {}: {error})", path.display()),
    }
}

/// The last `lines` lines of `text`.
pub fn last_lines(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// An exclusive advisory lock on a file, held until dropped, so two `up` (or an `up` and a
/// `down`) in parallel cannot both start a broker or race on its pid file.
pub struct Lock {
    _file: File,
}

impl Lock {
    pub fn acquire(path: &Path) -> Result<Lock, BrokerError> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(BrokerError::io("opening lock file", path))?;
        // SAFETY: flock on a descriptor we own; the lock is released when the file closes.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(BrokerError::io("locking", path)(io::Error::last_os_error()));
        }
        Ok(Lock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    #[test]
    fn pid_files_are_parsed_strictly() {
        assert_eq!(parse_pid("1234\n"), Some(1234));
        assert_eq!(parse_pid("  42  "), Some(42));
        assert_eq!(parse_pid("0"), None);
        assert_eq!(parse_pid("-5"), None);
        assert_eq!(parse_pid("12ab"), None);
        assert_eq!(parse_pid(""), None);
    }

    #[test]
    fn a_process_whose_main_thread_ended_is_alive_until_its_last_thread_ends() {
        // The main thread ends (pthread_exit) while another reads stdin until it is closed:
        // its /proc/PID/stat says zombie, and the process still holds what it opened.
        let script = "import ctypes, sys, threading\n\
                      threading.Thread(target=sys.stdin.read).start()\n\
                      ctypes.CDLL(None).pthread_exit(None)\n";
        let mut child = std::process::Command::new("python3")
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let leader_state = || {
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            process_state(&stat)
        };
        let began = Instant::now();
        while leader_state() != Some('Z') && began.elapsed() < Duration::from_secs(10) {
            thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(leader_state(), Some('Z'), "the main thread did not end");
        assert!(is_alive(pid), "its other thread still runs");
        // Found through a pid file, it is not ours (no command line left), and a start waits
        // for it.
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("broker.pid");
        write_pid_file(&pid_file, pid).unwrap();
        assert_eq!(find_ours(&pid_file, &["python3"]), None);
        drop(child.stdin.take());
        wait_if_exiting(&pid_file);
        reap(pid);
        assert!(!is_alive(pid), "wait_if_exiting returned before it exited");
        let _ = child.wait();
    }

    #[test]
    fn pid_file_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.pid");
        assert_eq!(read_pid_file(&path), None);
        write_pid_file(&path, 31337).unwrap();
        assert_eq!(read_pid_file(&path), Some(31337));
        remove_pid_file(&path).unwrap();
        remove_pid_file(&path).unwrap();
        assert_eq!(read_pid_file(&path), None);
    }

    #[test]
    fn cmdline_must_contain_every_argument_whole() {
        let properties = OsString::from("/h/kafka/server.properties");
        let required = [OsStr::new("kafka.Kafka"), properties.as_os_str()];
        let ours =
            b"java\0-Xmx1g\0-cp\0/h/kafka/4.1.1/lib/*\0kafka.Kafka\0/h/kafka/server.properties\0";
        assert!(cmdline_has_arguments(ours, &required));

        // Another home's broker: same main class, different configuration.
        let other = b"java\0kafka.Kafka\0/other/kafka/server.properties\0";
        assert!(!cmdline_has_arguments(other, &required));
        // A path that merely starts with ours is not ours.
        let longer = b"java\0kafka.Kafka\0/h/kafka/server.properties.bak\0";
        assert!(!cmdline_has_arguments(longer, &required));
        // An editor that has our configuration open is not the broker.
        let editor = b"vi\0/h/kafka/server.properties\0";
        assert!(!cmdline_has_arguments(editor, &required));
        // Zombies and kernel threads have an empty command line.
        assert!(!cmdline_has_arguments(b"", &required));
    }

    #[test]
    fn this_process_is_alive_and_checked_by_cmdline() {
        let pid = std::process::id();
        assert!(is_alive(pid));
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        let program = OsStr::from_bytes(cmdline.split(|&b| b == 0).next().unwrap()).to_owned();
        assert!(is_ours(pid, &[program.as_os_str()]));
        assert!(!is_ours(pid, &[OsStr::new("/no/such/server.properties")]));
    }

    #[test]
    fn state_is_read_after_the_last_parenthesis() {
        assert_eq!(process_state("12 (java) S 1 2 3"), Some('S'));
        assert_eq!(process_state("12 (a) b) (c)) Z 1 2"), Some('Z'));
        assert_eq!(process_state("garbage"), None);
    }

    #[test]
    fn exited_children_count_as_dead_and_stop_ends_a_process() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        assert!(is_alive(pid));
        stop("test", pid, Duration::from_secs(5)).unwrap();
        assert!(!is_alive(pid));
        // stop reaped it already; waiting again must not hang.
        let _ = child.try_wait();
    }

    #[test]
    fn detached_children_get_their_own_session() {
        let mut child = spawn_detached(Command::new("sleep").arg("30")).unwrap();
        let pid = child.id();
        // SAFETY: getsid has no memory-safety preconditions.
        let session = unsafe { libc::getsid(pid as libc::pid_t) };
        assert_eq!(session, pid as libc::pid_t);
        // SAFETY: as above, for our own session.
        assert_ne!(session, unsafe { libc::getsid(0) });
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_bound_port_cannot_be_listened_on() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(port_in_use(port));
        assert!(!can_listen(port));
        drop(listener);
        assert!(can_listen(port));
        // A wildcard listener takes the port on loopback too.
        let wildcard = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).unwrap();
        assert!(!can_listen(wildcard.local_addr().unwrap().port()));
    }

    #[test]
    fn commands_are_killed_after_their_timeout() {
        let status = run_with_timeout(&mut Command::new("true"), Duration::from_secs(5)).unwrap();
        assert!(status.unwrap().success());
        let started = Instant::now();
        let status =
            run_with_timeout(Command::new("sleep").arg("30"), Duration::from_millis(200)).unwrap();
        assert_eq!(status, None);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn rotated_logs_keep_one_previous_start() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("startup.log");
        rotate_log(&log).unwrap();
        fs::write(&log, "first").unwrap();
        rotate_log(&log).unwrap();
        assert!(!log.exists());
        fs::write(&log, "second").unwrap();
        rotate_log(&log).unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join("startup.log.1")).unwrap(),
            "second"
        );
    }

    #[test]
    fn log_tail_keeps_the_last_lines() {
        assert_eq!(last_lines("a\nb\nc\nd\n", 2), "c\nd");
        assert_eq!(last_lines("a\n", 5), "a");
        let dir = tempfile::tempdir().unwrap();
        let missing = log_tail(&dir.path().join("none.log"), 3);
        assert!(missing.starts_with("(could not read"), "{missing}");
    }
}
