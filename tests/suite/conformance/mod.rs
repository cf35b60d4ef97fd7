//! The conformance suite: the checks every broker family passes, written once. A family's
//! module declares a [`Subject`] (how its managed broker starts, its OMB driver files, its
//! broker-side count, its bad fields, what a kill costs it, its TLS listener, how it leaves
//! messages unconsumed or drops them by policy) and calls `conformance!(SUBJECT)`, which gives
//! it every check as a test of its own, `FAMILY::conformance::CHECK`. Its own test file then
//! holds only what is particular to it. `offline::registry` fails when a registered family
//! has no subject.
//!
//! Models: Apache OpenDAL's behaviour tests, run for every service; the `object_store`
//! crate's shared integration tests.

pub mod checks;

use crate::common::Run;

/// A family as the conformance suite drives it.
pub struct Subject {
    /// The family's registry name (`driver: NAME`, `broker up NAME`): its managed broker is
    /// started once for the suite ([`family_port`](crate::common::family_port)).
    pub family: &'static str,
    /// The broker's own count of a lossless run: what it checks besides brokerbench's ledger.
    pub counted: Counted,
    /// Two subscriptions of two members each (and partitions where the family has them).
    pub topology: Topology,
    /// OpenMessaging Benchmark driver files for the managed broker on `port`.
    pub omb: fn(port: u16) -> Vec<OmbFile>,
    /// `--set` assignments that point the driver at 127.0.0.1:1 with the password or token
    /// `hunter2`.
    pub unreachable: &'static [&'static str],
    /// `--set` assignments refused with exit 2, each with what the error must say.
    pub bad_fields: &'static [(&'static str, &'static str)],
    /// What a SIGKILL of the broker, started again a second later, may cost.
    pub kill: Kill,
    /// The TLS listener `broker up FAMILY --tls` adds, if the family has one.
    pub tls: Option<Tls>,
    /// How the family leaves acknowledged messages unread when the drain ends.
    pub unconsumed: Option<Unconsumed>,
    /// How the broker discards messages by its policy while the consumers wait for a backlog.
    pub dropped: Option<Dropped>,
}

/// A run whose consumers wait until a backlog of at least 5,000 messages has built while the
/// broker's limit discards messages: at least 4,000 are dropped, whatever the machine's speed.
pub struct Dropped {
    /// Its rate and seconds of measurement.
    pub rate: &'static str,
    pub seconds: u32,
    /// The broker's limit, as driver settings.
    pub limit: &'static [&'static str],
    /// The backlog the consumers wait for (100-byte messages, none read while it builds).
    pub backlog: &'static str,
    /// What the summary's notes say of the policy, if anything.
    pub note: Option<&'static str>,
}

/// The broker's own count of a lossless run.
pub struct Counted {
    /// Seconds of measurement at 2,000 msg/s: long enough for the broker's figures to cover
    /// the window (1 s of warm-up unless `sets` says otherwise).
    pub seconds: u32,
    /// `--set` assignments that keep the run's objects on the broker, `{prefix}` naming them,
    /// and any other setting the count needs.
    pub sets: &'static [&'static str],
    /// The assignment that names the run's objects, `{prefix}` in it.
    pub prefix: &'static str,
    /// Whether the broker's `messages_in` is exactly the acknowledged count (not a sampled rate).
    pub exact: bool,
    /// How far publish latency's p50 may be above end-to-end latency's, where the client
    /// stamps acknowledgements as they arrive (see `assert_publish_not_inflated_by_the_gap`).
    pub publish_slack_us: Option<u64>,
    /// Checks what the broker holds of the kept run (`prefix`) against its summary, and
    /// removes it.
    pub stored: fn(prefix: &str, run: &Run, summary: &serde_json::Value),
    /// The run's objects still on the broker after a run that keeps none; None for a family
    /// whose runs make none (mosquitto's topics are not objects).
    pub leftovers: Option<fn(prefix: &str) -> Vec<String>>,
}

/// A run of two subscriptions of two members each: every member gets a share, every
/// subscription every message.
pub struct Topology {
    /// Its settings, `{prefix}` naming the run's objects.
    pub sets: &'static [&'static str],
    /// What the broker holds of it (`prefix`), checked and removed, where the family keeps
    /// its objects for a look.
    pub stored: Option<fn(prefix: &str, run: &Run, summary: &serde_json::Value)>,
}

/// An OMB driver file and what running it (1 s at 1,000 msg/s) gives.
pub struct OmbFile {
    pub name: &'static str,
    pub text: String,
    /// More `--set` assignments for the run.
    pub sets: Vec<String>,
    /// What the manifest's input notes say of it.
    pub note: &'static str,
    pub expect: Expect,
    /// What else the run of it shows, where the family has more to check.
    pub check: Option<fn(run: &Run, summary: &serde_json::Value)>,
}

/// What a run is to give.
pub enum Expect {
    /// Every message sent acknowledged and received once.
    Lossless,
    /// Every message sent received once (at-most-once publishing: nothing is acknowledged).
    ReceivedAllSent,
    /// Refused before it starts (exit 2), the error saying each of these.
    Refused(&'static [&'static str]),
    /// Refused as that, before even the results folder is made (the family checks the file
    /// against the broker before the run creates anything).
    RefusedBeforeAnything(&'static [&'static str]),
}

/// What a broker killed and started again may cost.
pub struct Kill {
    /// `--set` assignments for the run (the durability the check relies on).
    pub sets: &'static [&'static str],
    /// Done before the run (Redis rewrites its append-only file, so that its restart does not
    /// replay what earlier tests wrote).
    pub prepare: Option<fn()>,
    /// What acknowledged messages it may lose.
    pub may_lose: MayLose,
    /// What else the family promises of such a run (its summary).
    pub check: Option<fn(summary: &serde_json::Value)>,
}

impl Subject {
    /// The family's bundled driver file (`workloads/drivers/NAME.yaml`).
    pub fn driver(&self) -> String {
        let drivers = concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/drivers");
        format!("{drivers}/{}.yaml", self.family)
    }
}

impl Kill {
    /// A kill with the `sets` of its run, nothing to prepare and nothing else to check.
    pub const fn with(sets: &'static [&'static str], may_lose: MayLose) -> Kill {
        Kill {
            sets,
            prepare: None,
            may_lose,
            check: None,
        }
    }
}

/// What a killed broker may lose of what it acknowledged.
pub enum MayLose {
    /// Nothing: it persists a message before it confirms it.
    Nothing,
    /// What it acknowledged, from the kill on, before its consumers were back: a broker that
    /// keeps no subscription across a restart (mosquitto's clean sessions, its queues in
    /// memory) acknowledges what reaches it before a subscriber is there again, and keeps it
    /// for nobody. Counted from the run's rows: the messages acknowledged in the seconds from
    /// the kill to the first in which the consumers received nine tenths of what was
    /// acknowledged.
    UntilTheConsumersAreBack,
    /// Of what it acknowledged as the kill landed, nothing sent before: the Pulsar standalone
    /// (its bookie's journal not synced, `journalSyncData=false`) once lost, in CI, 3 messages
    /// sent after the kill was issued and acknowledged before the JVM was gone (597 were
    /// acknowledged in that second; a quiet host and one with both cores busy lost none).
    /// Counted from the run's rows: what was acknowledged in the second before the first one
    /// marked with the fault and in that one; the fault window `before` must have lost nothing.
    AsTheKillLanded,
}

/// The TLS listener of the managed broker, and its driver file as `broker status FAMILY
/// --driver-file` prints it.
pub struct Tls {
    /// Where the driver file holds the secret.
    pub secret: Secret,
    /// How the manifest shows the redacted credential (`rediss://brokerbench:***@`).
    pub shown: &'static str,
    /// What a wrong secret's error says.
    pub wrong_secret: &'static [&'static str],
    /// What an untrusted certificate's error says besides "TLS handshake".
    pub untrusted: &'static [&'static str],
}

/// Where a TLS driver file holds its secret.
pub enum Secret {
    /// The user `brokerbench`'s password (the home's `tls/password`) in a URL after this text
    /// (`redis_url: rediss://`).
    InUrl(&'static str),
    /// That password in a field of its own (Kafka's `sasl.password`).
    Password,
    /// A token on the line that starts with this text (`auth_token: `).
    Line(&'static str),
}

/// Settings with which a consumer cannot keep up with a producer at the maximum rate, so the
/// drain (1 s) ends with acknowledged messages unread.
pub struct Unconsumed {
    /// The producer's rate (`max`, or one the consumer cannot keep up with).
    pub rate: &'static str,
    pub sets: &'static [&'static str],
    /// Whether such a run exits clean (0): false where confirms may still be outstanding when
    /// the drain ends (RabbitMQ: 809 counted unacknowledged once in 11 runs), the truth about
    /// such a run and not this check's matter.
    pub exits_clean: bool,
    /// What else the family's such run shows (its summary).
    pub check: Option<fn(summary: &serde_json::Value)>,
    /// What the summary's `unconsumed_evidence` names (the broker's own figure).
    pub evidence: &'static str,
}

/// Two subscriptions of two members each over three partitions, keys dealt round robin: the
/// topology of the families whose topics have partitions.
pub const PARTITIONED: &[&str] = &[
    "partitions_per_topic=3",
    "keys=round-robin",
    "subscriptions_per_topic=2",
    "consumers_per_topic=2",
];

/// Every check of the suite as a test of the family's module, `FAMILY::conformance::CHECK`:
/// the ones every family passes, and those of `tls`, `unconsumed` and `dropped` that the
/// family lists (it has the feature; its subject says how).
macro_rules! conformance {
    ($subject:expr $(, $optional:ident)*) => {
        mod conformance {
            use crate::conformance::checks;

            #[test]
            fn a_lossless_run_is_counted_by_the_broker() {
                checks::a_lossless_run_is_counted_by_the_broker(&$subject);
            }

            #[test]
            fn two_subscriptions_of_two_members_each_receive_every_message_once() {
                checks::two_subscriptions_of_two_members_each_receive_every_message_once(
                    &$subject,
                );
            }

            #[test]
            fn openmessaging_benchmark_driver_files_run_unchanged() {
                checks::openmessaging_benchmark_driver_files_run_unchanged(&$subject);
            }

            #[test]
            fn an_unreachable_broker_exits_3_fast_naming_how_to_start_it() {
                checks::an_unreachable_broker_exits_3_fast_naming_how_to_start_it(&$subject);
            }

            #[test]
            fn bad_driver_fields_exit_2_naming_the_field() {
                checks::bad_driver_fields_exit_2_naming_the_field(&$subject);
            }

            #[test]
            fn a_killed_broker_started_again_gets_its_clients_back() {
                checks::a_killed_broker_started_again_gets_its_clients_back(&$subject);
            }

            $(crate::conformance::optional_check!($optional, $subject);)*
        }
    };
}

/// The test of one optional check.
macro_rules! optional_check {
    (tls, $subject:expr) => {
        #[test]
        fn a_run_over_tls_keeps_secrets_and_wrong_credentials_are_refused_at_once() {
            checks::a_run_over_tls_keeps_secrets_and_wrong_credentials_are_refused_at_once(
                &$subject,
            );
        }
    };
    (unconsumed, $subject:expr) => {
        #[test]
        fn what_the_drain_leaves_unread_is_unconsumed_not_lost() {
            checks::what_the_drain_leaves_unread_is_unconsumed_not_lost(&$subject);
        }
    };
    (dropped, $subject:expr) => {
        #[test]
        fn what_the_broker_discards_by_policy_is_dropped_not_lost() {
            checks::what_the_broker_discards_by_policy_is_dropped_not_lost(&$subject);
        }
    };
}

pub(crate) use {conformance, optional_check};
