//! What is monitored: the role of a process, the target (a process or a process tree, and
//! how to find it again), and one target's sample.

/// Which side of the benchmark a monitored process is. The set is closed: resources.csv and
/// the summary have fixed columns for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// The broker under test (a local process: managed by brokerbench or named by the user).
    Broker,
    /// The benchmark client: this process, with its producers, consumers and the monitor.
    Client,
}

impl Role {
    /// Lower-case name, used as the column prefix in resources.csv.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Broker => "broker",
            Role::Client => "client",
        }
    }
}

/// Finds the process again after it was lost (a managed broker restarted under a new pid):
/// the pid it runs as now, if it runs.
#[derive(Clone)]
pub struct Refind(pub std::sync::Arc<dyn Fn() -> Option<u32> + Send + Sync>);

impl std::fmt::Debug for Refind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Refind")
    }
}

impl PartialEq for Refind {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Refind {}

/// A process (tree) to monitor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Broker or client; at most one target per role.
    pub role: Role,
    /// Process id of the root of the tree.
    pub root_pid: u32,
    /// Whether to count every descendant of the root too (re-scanned each sample, so children
    /// started later count). Threads always count: they are part of their process.
    pub include_descendants: bool,
    /// How to find the process again once it is gone; None: a lost process stays lost.
    pub refind: Option<Refind>,
    /// The node of a broker of several nodes this process is (1 to N), if known.
    pub node: Option<u32>,
}

impl Target {
    /// The broker: `pid` and all its descendants (a start script's JVM, helper processes).
    pub fn broker(pid: u32) -> Target {
        Target {
            role: Role::Broker,
            root_pid: pid,
            include_descendants: true,
            refind: None,
            node: None,
        }
    }

    /// Node `id` of a broker of several nodes.
    pub fn of_node(mut self, id: u32) -> Target {
        self.node = Some(id);
        self
    }

    /// Follows the process to its new pid when it is gone and `refind` finds it again.
    pub fn following(mut self, refind: impl Fn() -> Option<u32> + Send + Sync + 'static) -> Target {
        self.refind = Some(Refind(std::sync::Arc::new(refind)));
        self
    }

    /// The client: this process only. Descendants are left out because a managed local
    /// broker may be a child of this process and must not be counted twice.
    pub fn client() -> Target {
        Target {
            role: Role::Client,
            root_pid: std::process::id(),
            include_descendants: false,
            refind: None,
            node: None,
        }
    }
}

/// One target at one sample. Interval values cover the time since the previous sample
/// (`Sample::interval_s`) and are `None` on the first sample, after the process is lost, or
/// when the counter could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSample {
    /// Broker or client.
    pub role: Role,
    /// Process id of the root of the tree.
    pub root_pid: u32,
    /// The broker node it is, as its target says.
    pub node: Option<u32>,
    /// Whether the root process is running (false once it exited, became a zombie, or was
    /// never found; a lost process stays lost even if its pid is reused).
    pub alive: bool,
    /// When the root process was first found gone, ns since the UNIX epoch (the time of the
    /// first sample that did not find it alive).
    pub lost_at_ns: Option<u64>,
    /// Number of processes counted in this sample (root + live descendants).
    pub processes: u32,
    /// User-mode CPU in the interval, percent of one core.
    pub cpu_user_pct: Option<f64>,
    /// Kernel-mode CPU in the interval, percent of one core.
    pub cpu_system_pct: Option<f64>,
    /// Resident set size now, bytes, summed over the processes (shared pages count once per
    /// process, as in `ps`).
    pub rss_bytes: Option<u64>,
    /// Bytes read from storage in the interval (`read_bytes` of `/proc/PID/io`); `None` when
    /// that file is not readable (another user's process without CAP_SYS_PTRACE).
    pub disk_read_bytes: Option<u64>,
    /// Bytes written to storage in the interval (`write_bytes − cancelled_write_bytes`);
    /// `None` when `/proc/PID/io` is not readable.
    pub disk_written_bytes: Option<u64>,
    /// Threads now, summed over the processes.
    pub threads: Option<u64>,
}
