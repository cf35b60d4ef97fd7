//! The examples that end each command's long help (`--help`). Every line that starts with
//! `  brokerbench ` is parsed by the command line in tests/cli.rs, and every file it names must
//! exist in the repository, so an example cannot outlive the option or the file it shows.

pub const TOP: &str = "\
Examples:
  brokerbench run
      The quickstart: 50,000 msg/s of 100-byte messages to a managed local Kafka it starts.
  brokerbench run --set driver=rabbitmq --set rate=20000
      The same workload on the managed RabbitMQ at 20,000 msg/s.
  brokerbench study studies/replication-cost.yaml --quick
      A grid of runs, each a few seconds long (drop --quick for the real study).

Book: docs/src/getting-started.md (`brokerbench COMMAND --help` for each command)";

pub const RUN: &str = "\
Examples:
  brokerbench run
      The built-in quickstart against the managed local Kafka (started if need be).
  brokerbench run --set rate=max --set duration=10s
      The highest rate the broker takes, closed loop, for 10 s.
  brokerbench run workloads/replication/workload.yaml -d workloads/replication/kafka-r3.yaml
      Your own workload and driver files (OMB's files are read unchanged too).
  brokerbench run --set driver=nats --set message_size=1KiB --out results/nats-1k
      NATS JetStream's built-in driver file, 1 KiB messages, into a folder you name.
  brokerbench run --set driver=nats --set replicas=3 --fault at=5s,action=kill,node=leader,restart_after=5s
      Kill the node that leads the run's stream 5 s into the window, start it again 5 s later,
      and measure what it cost (brokerbench broker up nats --nodes 3 first).

Book: docs/src/workload.md (the fields --set reaches), docs/src/results.md (what it writes),
docs/src/faults.md (--fault)";

pub const STUDY: &str = "\
Examples:
  brokerbench study studies/rabiee-kafka.yaml --dry-run
      List every run of the grid after checking each of them; nothing runs.
  brokerbench study studies/rabiee-kafka.yaml --quick --set rate=10000
      A smoke test: one repetition, every run a few seconds long.
  brokerbench study studies/max-sustainable-kafka.yaml
      Search for the highest rate that keeps its latency objective (rate: find).

An interrupted study resumes where it stopped when run again (--fresh starts anew).
Book: docs/src/studies.md";

pub const COMPARE: &str = "\
Examples:
  brokerbench compare results/acks-1 results/acks-all
      Two runs side by side, the first the baseline of the ratios.
  brokerbench compare 'studies/20261125-101500-kafka#1' 'studies/20261125-101500-kafka#2' --json
      Two cells of a study (the cell column of cells.csv), with the noise of their repetitions.

Book: docs/src/results.md";

pub const REPORT: &str = "\
Examples:
  brokerbench report results/20261125-095658-quickstart
      Rebuild a run's report.html (a study folder works the same way).
  brokerbench report results/acks-1 results/acks-all --label acks=1 --label acks=all -o acks.html
      One page comparing runs, each under the name you give it.

Book: docs/src/results.md";

pub const MERGE: &str = "\
Examples:
  brokerbench merge results/shard-0 results/shard-1 -o results/merged
      Join the folders of a run's two shards into one run.
  brokerbench merge results
      Join the newest run's shards found in results/ and two levels below it.

Book: docs/src/scale-out.md";

pub const K8S: &str = "\
Examples:
  brokerbench k8s render --shards 4 deploy/kubernetes/scale-out.yaml deploy/kubernetes/kafka.yaml
      Manifests for four pods sharing the workload, into deploy/kubernetes/NAME; prints the
      kubectl commands that apply them.

Book: docs/src/scale-out.md";

pub const VALIDATE: &str = "\
Examples:
  brokerbench validate workloads/quickstart.yaml workloads/drivers/kafka.yaml
      Check a workload and a driver file; each error names the file, the field and the fix.

Book: docs/src/workload.md";

pub const BROKER: &str = "\
Examples:
  brokerbench broker install kafka
      Fetch Kafka's jars from Maven Central (scripts/setup does it for you).
  brokerbench broker up kafka
      Start the managed Kafka and wait until it answers (a running one is left as it is).
  brokerbench broker up rabbitmq --nodes 3
      A three-node RabbitMQ cluster (quorum queues get three members).
  brokerbench broker up nats --config max_payload=4MB
      A server setting on every node.
  brokerbench broker status kafka --json
      Every node's id, pid, address and whether it is up, for scripts.
  brokerbench broker down kafka
      Stop every node brokerbench started.

Book: docs/src/getting-started.md, docs/src/clusters.md";

pub const DATA: &str = "\
Examples:
  brokerbench data generate --records 100000 --out sensor.tsv
      Sensor records to replay with payload: {kind: file, path: sensor.tsv}.

Book: docs/src/workload.md";

pub const COMPLETIONS: &str = "\
Examples:
  brokerbench completions bash
      Print the bash script (scripts/setup installs it for every new shell).
  brokerbench completions zsh
      Print the zsh script, to save as _brokerbench in a folder of $fpath.";

pub const MAN: &str = "\
Examples:
  brokerbench man
      Print brokerbench.1 (read it with man -l, or install it where man looks).
  brokerbench man --out /usr/local/share/man/man1
      One page per command: man brokerbench-run, man brokerbench-study, ...";
