//! The repository's integration tests, one binary: its top-level modules are the groups
//! scripts/suite.py runs one after the other (`scripts/test --list` shows them). Each family's
//! module runs the conformance suite on the family's real managed broker and then what is
//! particular to it; `offline` needs no broker, `mock` runs on the in-memory mock family,
//! `clusters` and `studies` start brokers in homes of their own.

mod cdp;
mod common;
mod conformance;

mod artemis;
mod clusters;
mod kafka;
mod mock;
mod mqtt;
mod nats;
mod offline;
mod pulsar;
mod rabbitmq;
mod redis;
mod studies;
