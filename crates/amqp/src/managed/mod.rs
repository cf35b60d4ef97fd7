//! A managed RabbitMQ on loopback, run from the system's `rabbitmq-server` package (Debian:
//! `apt-get install rabbitmq-server`) as a node of its own, or a cluster of such nodes
//! (`broker up rabbitmq --nodes 3`, see [`nodes`]; node k keeps its folder in `node-k/`).
//!
//! The node shares nothing with a system RabbitMQ, running or not: it has its own node name
//! (`brokerbench_PORT@localhost`), ports, configuration, database, logs and Erlang cookie, and
//! the environment it starts with is cleared, so neither `RABBITMQ_*`/`ERL_*` variables of the
//! caller nor `/etc/rabbitmq/*` apply. Layout under `<home>/rabbitmq/`:
//!
//! ```text
//! rabbitmq.conf        listeners on 127.0.0.1 (AMQP, management, Prometheus); rewritten by every start
//! enabled_plugins      [rabbitmq_management,rabbitmq_prometheus].
//! rabbitmq-env.conf    empty on purpose: keeps /etc/rabbitmq/rabbitmq-env.conf out
//! .erlang.cookie       the node's cookie (HOME is this folder for the node and for rabbitmqctl)
//! state                AMQP port and note of the node `up` started; removed by `down`
//! rabbitmq.pid         pid of the node's beam.smp, written (and removed) by RabbitMQ itself
//! mnesia/NODE/         the node's database and message stores; kept by `down`
//! log/rabbitmq.log     RabbitMQ's log (previous start: .1)
//! log/startup.log      stdout and stderr of the start script, and of `rabbitmqctl stop`
//! ```
//!
//! Ports, for an AMQP port P (5672 unless set): management P+10000 (15672), Prometheus
//! P+10020 (15692), Erlang distribution P+20000 (25672): RabbitMQ's defaults, shifted together.
//! When any of them is taken by a process that is not this node (another RabbitMQ, say), `up`
//! tries P+1, P+2, ... (10 in all), and
//! [`BrokerStatus::note`](brokerbench_brokers::BrokerStatus::note) says which it took and why.
//!
//! `up` waits until the node answers the AMQP 0-9-1 handshake (its `Connection.Start` naming
//! our node) and both HTTP ports accept connections. RabbitMQ 3.10 starts the management and
//! Prometheus listeners before the AMQP one, so no `rabbitmqctl await_startup` (another
//! Erlang VM, about 0.7 s) is needed.
//!
//! epmd, the Erlang port mapper on 127.0.0.1:4369, is shared by every Erlang node on the host.
//! The node registers with the running one, or starts one (bound to loopback by
//! `ERL_EPMD_ADDRESS`) if there is none. `down` leaves epmd alone even then: other nodes (a
//! system RabbitMQ, another home's node) may have registered with it since, and stopping it

mod broker;
mod commands;
mod files;
mod install;
mod leader;
mod lifecycle;
mod names;
mod node;
mod nodes;
mod ports;
mod ready;
mod start;
mod tls_user;

pub use names::DEFAULT_PORT;
pub use node::RabbitMq;

#[cfg(test)]
mod tests;
