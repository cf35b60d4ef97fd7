//! Sampling real processes, disks and sockets on this host: no mocks, so each test fails when
//! the numbers from /proc are misread.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use brokerbench_monitor::{
    find_pids_by_name, system_clock_ns, Monitor, ResourcesCsv, Role, Sample, Sampler, Target,
    RESOURCES_COLUMNS,
};

/// Tests that measure CPU or disk take turns, so they do not load the host for each other.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(PoisonError::into_inner)
}

fn broker_target(pid: u32) -> Target {
    Target::broker(pid)
}

/// Kills `child` and reaps it with wait4, returning its CPU time (user + system), seconds.
fn kill_and_reap(child: &mut Child) -> f64 {
    child.kill().expect("killing the child");
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid is our own unreaped child; status and usage are valid pointers.
    let reaped = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(reaped, child.id() as i32, "wait4 failed");
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

fn broker(sample: &Sample) -> &brokerbench_monitor::ProcessSample {
    sample.process(Role::Broker).expect("broker target sampled")
}

#[test]
fn a_busy_child_uses_one_core() {
    let _turn = one_at_a_time();
    let mut child = Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .expect("spawning sh");
    let started = Instant::now();
    let mut sampler = Sampler::new(vec![broker_target(child.id())]).unwrap();
    let mut samples = vec![sampler.sample(system_clock_ns())];
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(500));
        samples.push(sampler.sample(system_clock_ns()));
    }
    let lifetime_s = started.elapsed().as_secs_f64();
    let cpu_by_kernel_s = kill_and_reap(&mut child);

    let (mut cpu_pct_seconds, mut seconds) = (0.0, 0.0);
    for sample in &samples[1..] {
        let p = broker(sample);
        assert!(p.alive);
        let dt = sample.interval_s.unwrap();
        cpu_pct_seconds += (p.cpu_user_pct.unwrap() + p.cpu_system_pct.unwrap()) * dt;
        seconds += dt;
    }
    let mean_pct = cpu_pct_seconds / seconds;
    let measured_cpu_s = cpu_pct_seconds / 100.0;
    eprintln!(
        "busy child: mean {mean_pct:.1}% of one core over {seconds:.2} s; {measured_cpu_s:.3} \
         CPU s sampled, {cpu_by_kernel_s:.3} CPU s by wait4 over {lifetime_s:.2} s"
    );
    // Independent of machine load: the sampled CPU time equals what wait4 reports.
    assert!(
        (measured_cpu_s - cpu_by_kernel_s).abs() <= 0.1 * cpu_by_kernel_s,
        "sampled {measured_cpu_s} CPU s, wait4 says {cpu_by_kernel_s}"
    );
    let share_granted = cpu_by_kernel_s / lifetime_s;
    if share_granted >= 0.9 {
        assert!(
            (90.0..=110.0).contains(&mean_pct),
            "a busy loop measured {mean_pct}% of one core"
        );
    } else {
        eprintln!(
            "host too busy for the absolute check: the kernel gave the busy child only \
             {:.0}% of a core",
            share_granted * 100.0
        );
    }
}

/// File system type of the mount holding `path`, from /proc/self/mountinfo.
fn file_system_type(path: &Path) -> Option<String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let path = path.canonicalize().ok()?;
    let mut best: Option<(usize, String)> = None;
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let mount_point = fields.get(4)?.replace("\\040", " ");
        let separator = fields.iter().position(|f| *f == "-")?;
        let fs_type = fields.get(separator + 1)?.to_string();
        if path.starts_with(&mount_point)
            && best
                .as_ref()
                .is_none_or(|(len, _)| mount_point.len() >= *len)
        {
            best = Some((mount_point.len(), fs_type));
        }
    }
    best.map(|(_, fs_type)| fs_type)
}

/// A directory on a disk-backed file system, or None when only memory-backed ones exist.
fn disk_backed_dir() -> Option<PathBuf> {
    let candidates = [
        Some(PathBuf::from(env!("CARGO_TARGET_TMPDIR"))),
        Some(PathBuf::from("/var/tmp")),
        Some(std::env::temp_dir()),
    ];
    candidates.into_iter().flatten().find(|dir| {
        dir.is_dir()
            && file_system_type(dir)
                .is_some_and(|fs| !matches!(fs.as_str(), "tmpfs" | "ramfs" | "devtmpfs"))
    })
}

const MIB: u64 = 1 << 20;
const COUNT: u64 = 32;

#[test]
fn bytes_written_and_fsynced_by_a_child_tree_are_counted() {
    let _turn = one_at_a_time();
    let Some(base) = disk_backed_dir() else {
        eprintln!("SKIPPED: no disk-backed directory (only tmpfs); write_bytes would stay 0");
        return;
    };
    let dir = tempfile::tempdir_in(&base).unwrap();
    let file = dir.path().join("written");
    // dd runs as a child of sh, fed slowly through a pipe so that samples see it part-way;
    // once sh reaps it, dd's I/O moves into sh's counters and must not count twice. The
    // final sleep keeps sh alive so its final counters are read.
    let script = format!(
        "i=0; while [ $i -lt {COUNT} ]; do head -c {MIB} /dev/zero; sleep 0.02; \
         i=$((i+1)); done | dd of='{}' bs=1M iflag=fullblock conv=fsync 2>/dev/null; sleep 1",
        file.display()
    );
    let mut child = Command::new("sh").args(["-c", &script]).spawn().unwrap();
    let mut sampler = Sampler::new(vec![broker_target(child.id())]).unwrap();
    let mut samples = vec![sampler.sample(system_clock_ns())];
    let deadline = Instant::now() + Duration::from_secs(30);
    while broker(samples.last().unwrap()).alive && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        samples.push(sampler.sample(system_clock_ns()));
    }
    child.wait().unwrap();
    let most_processes = samples.iter().map(|s| broker(s).processes).max();
    assert!(
        most_processes >= Some(3),
        "dd was never seen running, so its reaping was not checked: {most_processes:?}"
    );
    assert_eq!(std::fs::metadata(&file).unwrap().len(), COUNT * MIB);

    let written: u64 = samples
        .iter()
        .filter_map(|s| broker(s).disk_written_bytes)
        .sum();
    // None when /sys/block is not readable (some containers): nothing to check then.
    let host_written: Option<u64> = samples[1..]
        .iter()
        .map(|s| s.host.disk_written_bytes())
        .sum();
    let expected = COUNT * MIB;
    eprintln!(
        "wrote {expected} bytes in {}: process counted {written}, host disks {host_written:?}",
        base.display()
    );
    let deviation = (written as f64 - expected as f64).abs() / expected as f64;
    assert!(
        deviation <= 0.05,
        "counted {written} bytes, wrote {expected}"
    );
    if let Some(host_written) = host_written {
        assert!(
            host_written as f64 >= 0.95 * expected as f64,
            "host disks wrote {host_written} bytes during a {expected}-byte fsynced write"
        );
    }
}

#[test]
fn loopback_traffic_shows_on_lo() {
    const SENT: usize = 1 << 20;
    let mut sampler = Sampler::new(Vec::new()).unwrap();
    let before = sampler.sample(system_clock_ns());
    assert!(
        before.host.network.is_none(),
        "first sample is the baseline"
    );

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let receiver = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut received = Vec::new();
        stream.read_to_end(&mut received).unwrap();
        received.len()
    });
    let mut stream = TcpStream::connect(address).unwrap();
    stream.write_all(&vec![7u8; SENT]).unwrap();
    drop(stream);
    assert_eq!(receiver.join().unwrap(), SENT);

    let after = sampler.sample(system_clock_ns());
    let lo = after.host.loopback().expect("lo in /proc/net/dev");
    eprintln!("sent {SENT} bytes over 127.0.0.1: lo counted {lo:?}");
    assert!(lo.rx_packets > 0 && lo.tx_packets > 0);
    assert!(
        lo.rx_bytes >= SENT as u64,
        "lo received {} bytes",
        lo.rx_bytes
    );
    assert!(lo.tx_bytes >= SENT as u64, "lo sent {} bytes", lo.tx_bytes);
    let all = after.host.network_total().unwrap();
    assert!(all.rx_bytes >= lo.rx_bytes, "totals include lo");
}

#[test]
fn csv_header_is_the_committed_column_list_and_rows_fit_it() {
    let committed: Vec<String> = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/resources-columns.txt"
    ))
    .unwrap()
    .lines()
    .map(str::trim)
    .filter(|l| !l.is_empty() && !l.starts_with('#'))
    .map(String::from)
    .collect();
    assert_eq!(committed, RESOURCES_COLUMNS);

    let mut sampler = Sampler::new(vec![Target::client()]).unwrap();
    let mut csv = ResourcesCsv::new(Vec::new()).unwrap();
    csv.write(&sampler.sample(system_clock_ns())).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    csv.write(&sampler.sample(system_clock_ns())).unwrap();
    let text = String::from_utf8(csv.into_inner().unwrap()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0].split(',').collect::<Vec<_>>(), RESOURCES_COLUMNS);
    let cell = |line: &str, column: &str| -> String {
        let index = RESOURCES_COLUMNS.iter().position(|c| *c == column).unwrap();
        line.split(',').nth(index).unwrap().to_string()
    };
    for line in &lines[1..] {
        assert_eq!(line.split(',').count(), RESOURCES_COLUMNS.len(), "{line}");
        assert_eq!(
            cell(line, "broker_alive"),
            "",
            "no broker target: empty cells"
        );
        assert_eq!(cell(line, "client_alive"), "true");
    }
    assert_eq!(cell(lines[1], "interval_s"), "", "baseline has no interval");
    assert_eq!(cell(lines[1], "client_cpu_user_pct"), "");
    assert!(cell(lines[2], "interval_s").parse::<f64>().unwrap() > 0.0);
    assert!(cell(lines[2], "client_cpu_user_pct").parse::<f64>().is_ok());
    assert!(cell(lines[2], "client_rss_bytes").parse::<u64>().unwrap() > 0);
    assert!(cell(lines[2], "lo_rx_packets").parse::<u64>().is_ok());
}

#[test]
fn a_target_that_exits_is_reported_lost_and_sampling_goes_on() {
    let mut child = Command::new("sleep")
        .arg("0.3")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let clock = || system_clock_ns();
    let started_ns = clock();
    let monitor = Monitor::start(
        vec![broker_target(pid), Target::client()],
        Duration::from_millis(100),
        clock,
        |_| {},
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    // Reaped mid-run: from zombie to gone; neither may upset the monitor.
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let recording = monitor.stop();
    let samples = &recording.samples;
    assert!(samples.len() >= 8, "only {} samples", samples.len());

    let lost_index = samples
        .iter()
        .position(|s| !broker(s).alive)
        .expect("the exited process is reported");
    assert!(lost_index > 0, "the process was alive at the start");
    let lost_at = broker(&samples[lost_index]).lost_at_ns.unwrap();
    assert!(
        lost_at >= started_ns + 250_000_000,
        "lost too early: {lost_at}"
    );
    for sample in &samples[lost_index..] {
        let p = broker(sample);
        assert!(!p.alive);
        assert_eq!(p.lost_at_ns, Some(lost_at));
        assert_eq!(p.cpu_user_pct, None);
        assert!(sample.process(Role::Client).unwrap().alive);
    }
    let after = &samples[lost_index + 1..];
    assert!(
        after.len() >= 3,
        "sampling went on: {} samples",
        after.len()
    );
    assert!(after.iter().all(|s| s.host.cpu.is_some()));

    let summary = recording.summarize(0..u64::MAX);
    let broker_summary = summary.broker.unwrap();
    assert_eq!(broker_summary.lost_at_ns, Some(lost_at));
    assert!(broker_summary.threads_max.is_some());
    assert!(
        summary
            .notes
            .iter()
            .any(|n| n.contains(&format!("broker process {pid} stopped running"))),
        "{:?}",
        summary.notes
    );
    assert!(summary.client.unwrap().lost_at_ns.is_none());
}

/// This process's own CPU time, read by the procfs crate (not by the monitor), in seconds.
fn own_cpu_s() -> f64 {
    let stat = procfs::process::Process::myself().unwrap().stat().unwrap();
    (stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64
}

/// The host sampled around work of this process: the second sample, the CPU-s this process
/// had in between, and its share of all cores' time then, percent.
struct AroundOwnWork {
    sample: Sample,
    own_s: f64,
    own_pct: f64,
}

/// Samples the host, calls `work` until this process has had 0.2 CPU-s more (at most 30 s),
/// and samples it again.
fn around_own_work(mut work: impl FnMut()) -> AroundOwnWork {
    let mut sampler = Sampler::new(Vec::new()).unwrap();
    let (before, started) = (own_cpu_s(), Instant::now());
    sampler.sample(system_clock_ns());
    let give_up = Instant::now() + Duration::from_secs(30);
    while own_cpu_s() - before < 0.2 && Instant::now() < give_up {
        work();
    }
    let sample = sampler.sample(system_clock_ns());
    let (own_s, elapsed_s) = (own_cpu_s() - before, started.elapsed().as_secs_f64());
    let cores = sample.host.cpu_count as f64;
    AroundOwnWork {
        own_pct: own_s / (elapsed_s * cores) * 100.0,
        own_s,
        sample,
    }
}

#[test]
fn the_host_is_never_less_busy_than_a_thread_woken_in_short_bursts() {
    let _turn = one_at_a_time();
    // Asleep in a socket's receive timeout, which ends on a clock tick (the kernel rounds it
    // up to its tick), then busy 1 ms: each burst begins just after a tick and ends before the
    // next, so the tick-sampled busy fields of /proc/stat see almost none of it (measured with
    // a script doing the same: 0.44 CPU-s of run time in 6.1 CPU-s of time, user and system
    // up by 0.18, 0.44 short of the CPUs' time).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let _peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut quiet, _) = listener.accept().unwrap();
    quiet
        .set_read_timeout(Some(Duration::from_millis(1)))
        .unwrap();
    let mut spin = 0u64;
    let AroundOwnWork {
        sample,
        own_s,
        own_pct,
    } = around_own_work(|| {
        let nothing = quiet.read(&mut [0u8; 1]);
        assert!(nothing.is_err(), "the peer sends nothing: {nothing:?}");
        let burst_end = Instant::now() + Duration::from_millis(1);
        while Instant::now() < burst_end {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
    });
    let cpu = sample.host.cpu.expect("host CPU after two samples");
    let busy_pct = 100.0 - cpu.idle_pct - cpu.iowait_pct - cpu.steal_pct;
    eprintln!("host CPU: {cpu:?}; this process {own_pct:.1}% of all cores");
    assert!(own_s >= 0.2, "the bursts got {own_s:.2} CPU-s in 30 s");
    // This process's run time is read in 10-ms ticks, twice: 0.02 CPU-s of slack.
    let slack_pct = 0.02 / own_s * own_pct;
    assert!(
        busy_pct >= own_pct - slack_pct,
        "the host's busy share {busy_pct:.1}% is below this process's {own_pct:.1}%: {cpu:?}"
    );
    assert!((cpu.total_pct() - 100.0).abs() < 1e-6, "{cpu:?}");
}

#[test]
fn host_cpu_shares_show_a_busy_loop_of_this_process() {
    let _turn = one_at_a_time();
    // Spins until this process has had 0.2 CPU-s (half a second on an idle core; longer when
    // the host is busy and the loop gets less of a core).
    let mut spin = 0u64;
    let AroundOwnWork {
        sample,
        own_s,
        own_pct,
    } = around_own_work(|| {
        for _ in 0..100_000 {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
    });
    let cpu = sample.host.cpu.expect("host CPU after two samples");
    // The host was at least as busy as this process alone: its share of all cores' time.
    let busy_pct = 100.0 - cpu.idle_pct - cpu.iowait_pct;
    eprintln!("host CPU: {cpu:?}; this process {own_pct:.1}% of all cores");
    assert!(own_s >= 0.2, "the loop got {own_s:.2} CPU-s in 30 s");
    // Clock ticks are 10 ms: a few points of slack for what the two readings round.
    assert!(
        busy_pct >= own_pct - 5.0,
        "the host's busy share {busy_pct:.1}% is below this process's {own_pct:.1}%: {cpu:?}"
    );
    for share in [cpu.user_pct, cpu.system_pct, cpu.idle_pct, cpu.iowait_pct] {
        assert!((0.0..=100.0).contains(&share));
    }
    assert!(sample.host.cpu_count >= 1);
    assert!(sample.host.memory_used_bytes.unwrap() > 0);
    assert!(sample.host.load_1m.is_some());
}

#[test]
fn monitor_summary_covers_only_the_window() {
    let _turn = one_at_a_time();
    let clock = || system_clock_ns();
    let monitor = Monitor::start(
        vec![Target::client()],
        Duration::from_millis(50),
        clock,
        |_| {},
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let from = clock();
    // Burn this thread's CPU inside the window only.
    let busy_until = Instant::now() + Duration::from_millis(400);
    let mut spin = 0u64;
    while Instant::now() < busy_until {
        spin = std::hint::black_box(spin.wrapping_add(1));
    }
    let to = clock();
    std::thread::sleep(Duration::from_millis(300));
    let recording = monitor.stop();
    let window = recording.summarize(from..to);
    let whole = recording.summarize(0..u64::MAX);
    assert!(window.samples < whole.samples);
    assert!(
        (window.window_s - 0.4).abs() < 0.1,
        "window {} s",
        window.window_s
    );
    let busy = window.client.unwrap().cpu_user_pct_mean.unwrap();
    let overall = whole.client.unwrap().cpu_user_pct_mean.unwrap();
    eprintln!("client CPU: {busy:.1}% in the busy window, {overall:.1}% overall");
    assert!(
        busy > overall,
        "the window mean is higher than the run mean"
    );
}

#[test]
fn broker_found_by_name_is_the_topmost_match() {
    let name = format!("brokerbench-find-test-{}", std::process::id());
    // sh keeps running (no exec of the last command) because of the trailing ':'.
    let inner = format!("sh -c 'sleep 5; :' {name}; :");
    let mut child = Command::new("sh")
        .args(["-c", &inner, &name])
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until the inner sh exists too, so that two processes match.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut found = Vec::new();
    while Instant::now() < deadline {
        found = find_pids_by_name(&name);
        let children =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        if !children.trim().is_empty() {
            found = find_pids_by_name(&name);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(found, vec![pid]);
    assert!(find_pids_by_name("no-such-process-brokerbench-xyz").is_empty());
}
