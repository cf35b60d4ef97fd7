//! Per-process sampling: which processes a target covers, their CPU, memory, storage I/O and
//! threads, and finding a broker process by name.
//!
//! Counting a process tree. For a target with descendants, the CPU and I/O counters of the
//! tree are `Σ over live members of (own + reaped children)`: `utime + cutime`,
//! `stime + cstime` and `/proc/PID/io` (which already includes reaped children). That sum
//! only grows while processes are born and reaped inside the tree, so short-lived children
//! (started and reaped between two samples) are counted too. The interval value is the sum
//! now minus the previous readings of the members that are still members or that died; a
//! member that left the tree alive (re-parented, e.g. a daemon that double-forks) is not
//! subtracted and its last interval is lost. A member that died but was reaped outside the
//! tree makes the interval value too small (never negative: it is clamped at 0).

mod find;
mod nodes;
mod target;
mod tree;

pub use self::find::find_pids_by_name;
pub use self::nodes::{broker_nodes, sum_by_role};
pub use self::target::{ProcessSample, Refind, Role, Target};
pub(crate) use self::tree::{descendants, Processes, TargetState, Units};
