use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use brokerbench_brokers::process;
use brokerbench_brokers::tls::TlsFiles;
use brokerbench_brokers::BrokerError;

use crate::probe::ProbeError;

use super::files::*;
use super::install::*;
use super::names::*;
use super::node::RabbitMq;
use super::ports::*;
use brokerbench_brokers::test_support::{self, DownOnDrop};
use std::io::Write;
use std::net::TcpStream;

impl test_support::Managed for RabbitMq {
    fn pid_file(&self) -> PathBuf {
        RabbitMq::pid_file(self)
    }
}
use std::collections::HashMap;
use std::net::TcpListener;
use std::thread;
use std::time::Instant;

#[test]
fn server_settings_are_lines_of_rabbitmq_conf() {
    let settings = vec![("channel_max".to_string(), "64".to_string())];
    assert_eq!(
            settings_lines(&settings),
            "# Server settings (`brokerbench broker up rabbitmq --config KEY=VALUE`).\nchannel_max = 64\n"
        );
    assert_eq!(settings_lines(&Vec::new()), "");
}

#[test]
fn configuration_listens_on_loopback_only() {
    let conf = rabbitmq_conf(15999, None);
    let expected = [
        ("listeners.tcp.default", "127.0.0.1:15999"),
        ("management.tcp.ip", "127.0.0.1"),
        ("management.tcp.port", "25999"),
        ("prometheus.tcp.ip", "127.0.0.1"),
        ("prometheus.tcp.port", "26019"),
        ("loopback_users.guest", "true"),
    ];
    let settings = test_support::assert_settings(&conf, " = ", &expected);
    assert_eq!(settings.len(), expected.len(), "{conf}");
    // The defaults: RabbitMQ's own ports.
    let conf = rabbitmq_conf(DEFAULT_PORT, None);
    assert!(conf.contains("management.tcp.port = 15672\n"), "{conf}");
    assert!(conf.contains("prometheus.tcp.port = 15692\n"), "{conf}");
    assert_eq!(
        port_layout(DEFAULT_PORT, false)
            .into_iter()
            .map(|(port, _)| port)
            .collect::<Vec<_>>(),
        [5672, 15672, 15692, 25672]
    );
    assert_eq!(PLUGINS, "[rabbitmq_management,rabbitmq_prometheus].\n");
    assert_eq!(conf_tls_port(&conf), None);
}

#[test]
fn with_tls_the_node_also_listens_for_amqps_on_the_port_before() {
    let tls = TlsFiles::of(Path::new("/h/rabbitmq"));
    let conf = rabbitmq_conf(15999, Some(&tls));
    let expected = [
        ("listeners.tcp.default", "127.0.0.1:15999"),
        ("listeners.ssl.default", "127.0.0.1:15998"),
        ("ssl_options.cacertfile", "/h/rabbitmq/tls/ca.pem"),
        ("ssl_options.certfile", "/h/rabbitmq/tls/server.pem"),
        ("ssl_options.keyfile", "/h/rabbitmq/tls/server-key.pem"),
        ("ssl_options.verify", "verify_peer"),
        ("ssl_options.fail_if_no_peer_cert", "false"),
        ("auth_mechanisms.3", "EXTERNAL"),
        ("ssl_cert_login_from", "common_name"),
    ];
    test_support::assert_settings(&conf, " = ", &expected);
    assert_eq!(conf_tls_port(&conf), Some(15998));
    assert!(port_layout(5672, true).contains(&(5671, "AMQP over TLS")));
    assert!(PLUGINS_TLS.contains("rabbitmq_auth_mechanism_ssl"));
    // A candidate whose amqps port is taken is skipped only when TLS is on.
    assert_eq!(
        choose_port(5672, false, |port| port == 5671).unwrap().0,
        5672
    );
    assert_eq!(
        choose_port(5672, true, |port| port == 5671).unwrap().0,
        5673
    );
}

#[test]
fn server_command_points_every_path_into_our_folder() {
    let rabbit = RabbitMq::new(Path::new("/h")).with_port(15999);
    let command = rabbit.server_command(Path::new(PACKAGE_BIN_DIR), 15999);
    assert_eq!(
        command.get_program(),
        OsStr::new("/usr/lib/rabbitmq/bin/rabbitmq-server")
    );
    let arguments: Vec<&OsStr> = command.get_args().collect();
    let expected = [
        "-kernel",
        "inet_dist_use_interface",
        "{127,0,0,1}",
        "-brokerbench_dir",
        "/h/rabbitmq",
    ];
    assert_eq!(arguments, expected.map(OsStr::new));
    let environment: HashMap<&OsStr, Option<&OsStr>> = command.get_envs().collect();
    let expected = [
        ("HOME", "/h/rabbitmq"),
        ("RABBITMQ_NODENAME", "brokerbench_15999@localhost"),
        ("RABBITMQ_CONF_ENV_FILE", "/h/rabbitmq/rabbitmq-env.conf"),
        ("RABBITMQ_BASE", "/h/rabbitmq"),
        ("RABBITMQ_CONFIG_FILE", "/h/rabbitmq/rabbitmq.conf"),
        ("RABBITMQ_CONFIG_FILES", "/h/rabbitmq/conf.d"),
        (
            "RABBITMQ_ADVANCED_CONFIG_FILE",
            "/h/rabbitmq/advanced.config",
        ),
        (
            "RABBITMQ_ENABLED_PLUGINS_FILE",
            "/h/rabbitmq/enabled_plugins",
        ),
        ("RABBITMQ_MNESIA_BASE", "/h/rabbitmq/mnesia"),
        ("RABBITMQ_LOG_BASE", "/h/rabbitmq/log"),
        ("RABBITMQ_LOGS", "/h/rabbitmq/log/rabbitmq.log"),
        ("RABBITMQ_PID_FILE", "/h/rabbitmq/rabbitmq.pid"),
        ("RABBITMQ_DIST_PORT", "35999"),
        ("ERL_EPMD_ADDRESS", "127.0.0.1"),
        ("ERL_CRASH_DUMP", "/h/rabbitmq/log/erl_crash.dump"),
    ];
    for (name, value) in expected {
        assert_eq!(
            environment.get(OsStr::new(name)),
            Some(&Some(OsStr::new(value))),
            "{name}"
        );
    }
    assert_eq!(command.get_current_dir(), Some(Path::new("/h/rabbitmq")));

    // What `down` looks for on beam's command line is what the script hands to erl, plus
    // the boot module the script adds (`-s rabbit boot`); the script's shell lacks that.
    let boot = ["beam.smp", "-s", "rabbit"].map(OsStr::new);
    let beam = test_support::cmdline(boot.into_iter().chain(arguments.iter().copied()));
    assert!(process::cmdline_has_arguments(
        &beam,
        &rabbit.ownership_arguments()
    ));
    let shell = b"/bin/sh\0/usr/lib/rabbitmq/bin/rabbitmq-server\0-brokerbench_dir\0/h/rabbitmq\0";
    assert!(!process::cmdline_has_arguments(
        shell,
        &rabbit.ownership_arguments()
    ));
    let other = RabbitMq::new(Path::new("/elsewhere")).ownership_arguments();
    assert!(!process::cmdline_has_arguments(&beam, &other));
}

#[test]
fn rabbitmqctl_shares_the_nodes_home_and_name() {
    let home = tempfile::tempdir().unwrap();
    let rabbit = RabbitMq::new(home.path());
    fs::create_dir_all(rabbit.logs_dir()).unwrap();
    let command = rabbit
        .ctl_command(Path::new(PACKAGE_BIN_DIR), 5673, &["stop"])
        .unwrap();
    let arguments: Vec<&OsStr> = command.get_args().collect();
    assert_eq!(
        arguments,
        ["-n", "brokerbench_5673@localhost", "stop"].map(OsStr::new)
    );
    let environment: HashMap<&OsStr, Option<&OsStr>> = command.get_envs().collect();
    assert_eq!(
        environment.get(OsStr::new("HOME")),
        Some(&Some(rabbit.dir().as_os_str()))
    );
}

#[test]
fn the_preferred_port_is_taken_when_its_layout_is_free() {
    assert_eq!(choose_port(5672, false, |_| false), Ok((5672, vec![])));
}

#[test]
fn a_taken_port_moves_the_node_up_and_says_why() {
    // 5672 held by a system RabbitMQ, 15673 (management for 5673) by something else.
    let (port, skipped) = choose_port(5672, false, |port| port == 5672 || port == 15673).unwrap();
    assert_eq!(port, 5674);
    assert_eq!(
        skipped,
        [
            Busy {
                amqp_port: 5672,
                port: 5672,
                role: "AMQP"
            },
            Busy {
                amqp_port: 5673,
                port: 15673,
                role: "management"
            },
        ]
    );
    assert_eq!(skipped[0].describe(), "5672 (AMQP)");
    assert_eq!(skipped[1].describe(), "15673 (management for AMQP 5673)");
    let (port, skipped) = choose_port(5672, false, |port| port == 25672).unwrap();
    assert_eq!((port, skipped[0].role), (5673, "Erlang distribution"));
}

#[test]
fn ten_taken_ports_are_an_error_naming_them() {
    let busy = choose_port(5672, false, |port| (5672..5700).contains(&port)).unwrap_err();
    assert_eq!(busy.len(), 10);
    assert_eq!(busy[9].port, 5681);
    // Near the top of the range there are fewer candidates, never an overflow.
    let busy = choose_port(MAX_PORT - 1, false, |_| true).unwrap_err();
    assert_eq!(busy.len(), 2);
    assert_eq!(
        choose_port(MAX_PORT, false, |_| false),
        Ok((MAX_PORT, vec![]))
    );
}

#[test]
fn a_note_names_the_taken_port_and_the_new_one() {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let taken = listener.local_addr().unwrap().port();
    let busy = Busy {
        amqp_port: taken,
        port: taken,
        role: "AMQP",
    };
    // The listener never answers the AMQP header: "another process".
    drop(listener);
    let note = moved_note(&busy, 5673);
    assert_eq!(
            note,
            format!("port {taken} (AMQP) is taken by another process, not this brokerbench RabbitMQ: listening on 5673 instead (management 15673, Prometheus 15693)")
        );
}

#[test]
fn state_round_trip() {
    let state = State {
        port: 5673,
        note: Some("port 5672 (AMQP) is taken\nby someone".to_string()),
        script_pid: Some(4242),
    };
    let parsed = parse_state(&format_state(&state)).unwrap();
    assert_eq!(parsed.port, 5673);
    assert_eq!(parsed.script_pid, Some(4242));
    assert_eq!(
        parsed.note.as_deref(),
        Some("port 5672 (AMQP) is taken by someone")
    );
    let plain = State {
        port: 5672,
        note: None,
        script_pid: None,
    };
    assert_eq!(parse_state(&format_state(&plain)), Some(plain));
    assert_eq!(parse_state("note=x\n"), None);
    assert_eq!(parse_state("port=lots\n"), None);
}

#[test]
fn amqp_uri_and_ports_follow_the_recorded_port() {
    let home = tempfile::tempdir().unwrap();
    let rabbit = RabbitMq::new(home.path()).with_port(15999);
    assert_eq!(rabbit.amqp_uri(), "amqp://guest:guest@127.0.0.1:15999/%2f");
    assert_eq!(rabbit.node_name(), "brokerbench_15999@localhost");
    fs::create_dir_all(rabbit.dir()).unwrap();
    rabbit
        .write_state(&State {
            port: 16000,
            note: None,
            script_pid: None,
        })
        .unwrap();
    assert_eq!(rabbit.amqp_port(), 16000);
    assert_eq!(rabbit.amqp_uri(), "amqp://guest:guest@127.0.0.1:16000/%2f");
    assert_eq!(rabbit.management_port(), 26000);
    assert_eq!(rabbit.prometheus_port(), 26020);
    assert_eq!(
        rabbit.data_dir(),
        rabbit.dir().join("mnesia/brokerbench_16000@localhost")
    );
}

#[test]
fn port_variable_leaves_room_for_the_distribution_port() {
    test_support::assert_port_variable(5672, 1..=PORT_RULE.max, 45535);
}

#[test]
fn invalid_ports_are_reported_by_up() {
    let home = tempfile::tempdir().unwrap();
    for port in [0, MAX_PORT + 1] {
        let error = RabbitMq::new(home.path()).with_port(port).up().unwrap_err();
        assert!(
            matches!(error, BrokerError::PortOutOfRange { .. }),
            "{error}"
        );
        assert!(error.to_string().contains("port + 20000"), "{error}");
    }
}

#[test]
fn debians_sbin_wrapper_is_not_a_usable_server() {
    let dir = tempfile::tempdir().unwrap();
    let wrapper = dir.path().join(DEBIAN_WRAPPER);
    fs::write(&wrapper, "#!/bin/sh\n").unwrap();
    fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755)).unwrap();
    let sbin = dir.path().join("sbin");
    fs::create_dir(&sbin).unwrap();
    for name in [SERVER, CTL] {
        std::os::unix::fs::symlink(&wrapper, sbin.join(name)).unwrap();
    }
    assert!(!is_usable_script(&sbin.join(SERVER)));

    // A tarball-style install on PATH is found, with its version from the folder name.
    let release = dir.path().join("rabbitmq_server-3.13.7/sbin");
    fs::create_dir_all(&release).unwrap();
    for name in [SERVER, CTL] {
        let script = release.join(name);
        fs::write(&script, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    }
    assert!(is_usable_script(&release.join(SERVER)));
    assert_eq!(version_from_install(&release).as_deref(), Some("3.13.7"));
    let path = std::env::join_paths([&sbin, &release]).unwrap();
    let found = find_bin_dir(Some(path)).unwrap();
    // Debian's package folder wins when it is installed.
    assert!(
        found == release || found == Path::new(PACKAGE_BIN_DIR),
        "{found:?}"
    );
}

#[test]
fn debian_versions_lose_epoch_and_revision() {
    assert_eq!(
        upstream_version("3.10.8-1.1+deb12u1\n").as_deref(),
        Some("3.10.8")
    );
    assert_eq!(upstream_version("1:3.12.1-2").as_deref(), Some("3.12.1"));
    assert_eq!(upstream_version("3.9.13").as_deref(), Some("3.9.13"));
    assert_eq!(upstream_version(""), None);
}

#[test]
fn boot_failures_are_quoted_from_their_block() {
    // A configuration error, as the start script's stdout shows it.
    let startup = "\
2026-11-22 04:27:02.59 [info] <0.132.0> noise
2026-11-22 04:27:02.59 [error] <0.132.0> Error preparing configuration in phase transform_datatypes:
2026-11-22 04:27:02.61 [error] <0.132.0>   - \"127.0.0.1:15999x\" cannot be converted to a(n) IP

BOOT FAILED
===========
Error during startup: {error,failed_to_prepare_configuration}

crash report 1
";
    let excerpt = boot_failure(startup).unwrap();
    assert!(
        excerpt.starts_with("2026-11-22 04:27:02.59 [error] <0.132.0> Error preparing"),
        "{excerpt}"
    );
    assert!(
        excerpt.ends_with("Error during startup: {error,failed_to_prepare_configuration}"),
        "{excerpt}"
    );

    // A reason spanning lines, after unrelated messages.
    let startup = "\
2026-11-22 04:40:34.86 [notice] <0.223.0> Logging: switching to configured handler(s)

BOOT FAILED
===========
Error during startup: {error,
                          {cannot_create_mnesia_dir,
                              \"/h/rabbitmq/mnesia/brokerbench_15999@localhost/\",
                              eexist}}

{\"Kernel pid terminated\",application_controller,\"...\"}
";
    let excerpt = boot_failure(startup).unwrap();
    assert!(excerpt.starts_with("BOOT FAILED\n"), "{excerpt}");
    assert!(excerpt.ends_with("eexist}}"), "{excerpt}");

    // RabbitMQ's own log: blank lines carry a prefix.
    let log = "\
2026-11-22 04:40:46.69 [error] <0.223.0> 
2026-11-22 04:40:46.69 [error] <0.223.0> BOOT FAILED
2026-11-22 04:40:46.69 [error] <0.223.0> Error during startup: {error,
2026-11-22 04:40:46.69 [error] <0.223.0>     eexist}}
2026-11-22 04:40:46.69 [error] <0.223.0> 
2026-11-22 04:40:47.70 [error] <0.222.0>   crasher:
";
    let excerpt = boot_failure(log).unwrap();
    assert!(excerpt.starts_with("2026-11-22 04:40:46.69 [error] <0.223.0> BOOT FAILED"));
    assert!(excerpt.ends_with("eexist}}"), "{excerpt}");

    assert_eq!(boot_failure("all fine\n"), None);
}

#[test]
fn cookies_are_capital_letters() {
    let cookie = random_cookie().unwrap();
    assert_eq!(cookie.len(), 20);
    assert!(
        cookie.bytes().all(|byte| byte.is_ascii_uppercase()),
        "{cookie}"
    );
    assert_ne!(random_cookie().unwrap(), cookie);
}

#[test]
fn cookie_is_made_once_and_private() {
    let home = tempfile::tempdir().unwrap();
    let rabbit = RabbitMq::new(home.path());
    fs::create_dir_all(rabbit.dir()).unwrap();
    rabbit.ensure_cookie().unwrap();
    let cookie = fs::read_to_string(rabbit.cookie_file()).unwrap();
    let mode = fs::metadata(rabbit.cookie_file())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o400);
    rabbit.ensure_cookie().unwrap();
    assert_eq!(fs::read_to_string(rabbit.cookie_file()).unwrap(), cookie);
}

/// A `Connection.Start` payload as RabbitMQ sends it (abridged).
fn connection_start(properties: &[(&str, u8, &[u8])]) -> Vec<u8> {
    let mut table = Vec::new();
    for (name, kind, value) in properties {
        table.push(name.len() as u8);
        table.extend_from_slice(name.as_bytes());
        table.push(*kind);
        if matches!(kind, b'S' | b'F') {
            table.extend_from_slice(&(value.len() as u32).to_be_bytes());
        }
        table.extend_from_slice(value);
    }
    let mut payload = vec![0, 10, 0, 10, 0, 9];
    payload.extend_from_slice(&(table.len() as u32).to_be_bytes());
    payload.extend_from_slice(&table);
    for long_string in [&b"AMQPLAIN PLAIN"[..], b"en_US"] {
        payload.extend_from_slice(&(long_string.len() as u32).to_be_bytes());
        payload.extend_from_slice(long_string);
    }
    payload
}

#[test]
fn connection_start_properties_are_read() {
    let capabilities = [
        &[17u8][..],
        b"publisher_confirms",
        b"t",
        &[1],
        &[10],
        b"per_consumer_qos",
    ]
    .concat();
    // A nested table with a bool, then a truncated entry: parsing must stop, not panic.
    let payload = connection_start(&[
        (
            "capabilities",
            b'F',
            &capabilities[..capabilities.len() - 17],
        ),
        ("cluster_name", b'S', b"brokerbench_15999@localhost"),
        ("product", b'S', b"RabbitMQ"),
        ("version", b'S', b"3.10.8"),
    ]);
    let read = |payload: &[u8]| {
        crate::probe::start_properties(&payload[4..])
            .map(|properties| ServerInfo::from_properties(&properties))
    };
    let info = read(&payload).unwrap();
    assert_eq!(
        info,
        ServerInfo {
            product: Some("RabbitMQ".to_string()),
            version: Some("3.10.8".to_string()),
            cluster_name: Some("brokerbench_15999@localhost".to_string()),
        }
    );
    assert_eq!(
        info.describe(),
        "RabbitMQ 3.10.8, node brokerbench_15999@localhost"
    );
    // A cut-off payload has no properties table.
    assert_eq!(read(&payload[..8]), None);
    // Unknown value types end the table early but keep what came before.
    let odd = connection_start(&[("product", b'S', b"X"), ("weird", b'?', b"")]);
    assert_eq!(read(&odd).unwrap().product.as_deref(), Some("X"));
}

#[test]
fn probes_reject_servers_that_do_not_speak_amqp() {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = thread::spawn(move || {
        let (mut client, _) = listener.accept().unwrap();
        let mut header = [0u8; 8];
        client.read_exact(&mut header).unwrap();
        assert_eq!(&header, crate::wire::PROTOCOL_HEADER);
        // An AMQP 1.0 broker answers with its own protocol header.
        client.write_all(b"AMQP\x00\x01\x00\x00").unwrap();
    });
    let error = amqp_probe(port, Duration::from_secs(2)).unwrap_err();
    assert!(matches!(error, ProbeError::Unreachable(_)), "{error:?}");
    server.join().unwrap();

    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = thread::spawn(move || {
        let (mut client, _) = listener.accept().unwrap();
        let mut header = [0u8; 8];
        client.read_exact(&mut header).unwrap();
        let payload = connection_start(&[("product", b'S', b"FakeMQ")]);
        let mut frame = vec![1, 0, 0];
        frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        frame.extend_from_slice(&payload);
        frame.push(0xCE);
        client.write_all(&frame).unwrap();
    });
    let info = amqp_probe(port, Duration::from_secs(2)).unwrap();
    assert_eq!(info.product.as_deref(), Some("FakeMQ"));
    server.join().unwrap();
}

/// A plain HTTP/1.0 GET on loopback: the status code and the body.
fn http_get(port: u16, path: &str, authorization: Option<&str>) -> (u16, String) {
    let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n");
    if let Some(credentials) = authorization {
        request.push_str(&format!("Authorization: Basic {credentials}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, body)| body.to_string());
    (status, body)
}

/// Starts, checks and stops a real node from the installed package in a temporary home,
/// preferring an AMQP port P the system chooses (management P+10000, Prometheus P+10020,
/// distribution P+20000, the same for P+1). A listener of ours holds P at first, so the
/// node has to move to P+1 and say so.
#[test]
fn real_node_lifecycle() {
    let home = tempfile::tempdir().unwrap();
    let preferred = test_support::free_port_layout(&[
        0,
        1,
        MANAGEMENT_OFFSET,
        MANAGEMENT_OFFSET + 1,
        PROMETHEUS_OFFSET,
        PROMETHEUS_OFFSET + 1,
        DISTRIBUTION_OFFSET,
        DISTRIBUTION_OFFSET + 1,
    ]);
    let moved = preferred + 1;
    let rabbit = RabbitMq::new(home.path()).with_port(preferred);
    assert!(
        rabbit.is_installed(),
        "install the rabbitmq-server package (scripts/setup does)"
    );
    let _down_on_drop = DownOnDrop(&rabbit);
    assert_eq!(rabbit.status().unwrap(), None);
    assert_eq!(rabbit.down().unwrap(), None);

    // A foreign listener on the preferred port: the node moves up one and says so.
    let foreign =
        TcpListener::bind((Ipv4Addr::LOCALHOST, preferred)).expect("the preferred port is free");
    let status = test_support::assert_starts(&rabbit, "up (cold start, new database)");
    assert_eq!(status.name, "rabbitmq");
    assert_eq!(status.address, format!("127.0.0.1:{moved}"));
    assert_eq!(status.version, rabbit.version());
    assert!(status.version.starts_with("3."), "{}", status.version);
    let note = status.note.clone().expect("a note about the port");
    assert!(
        note.contains(&format!("{preferred} (AMQP) is taken by another process"))
            && note.contains(&format!("listening on {moved}")),
        "{note}"
    );
    eprintln!("note: {note}");
    assert_eq!(status.data_dir, rabbit.data_dir());
    assert!(status.data_dir.is_dir());
    assert_eq!(
        fs::read_to_string(format!("/proc/{}/comm", status.pid))
            .unwrap()
            .trim(),
        "beam.smp"
    );
    assert_eq!(process::read_pid_file(&rabbit.pid_file()), Some(status.pid));
    assert_eq!(rabbit.status().unwrap(), Some(status.clone()));
    assert_eq!(
        rabbit.amqp_uri(),
        format!("amqp://guest:guest@127.0.0.1:{moved}/%2f")
    );
    assert_eq!(rabbit.node_name(), format!("brokerbench_{moved}@localhost"));

    test_support::assert_still_running(&rabbit, &status);

    // AMQP answers, as our node.
    let server = amqp_probe(moved, Duration::from_secs(5)).expect("AMQP handshake");
    assert_eq!(server.product.as_deref(), Some("RabbitMQ"));
    assert_eq!(server.version.as_deref(), Some(status.version.as_str()));
    let cluster = server.cluster_name.unwrap_or_default();
    assert_eq!(
        node_part(&cluster),
        format!("brokerbench_{moved}"),
        "{cluster}"
    );

    // Prometheus and management answer HTTP on loopback.
    let (code, metrics) = http_get(rabbit.prometheus_port(), "/metrics", None);
    assert_eq!(code, 200, "{metrics}");
    assert!(metrics.contains("rabbitmq_"), "{metrics}");
    // guest:guest, base64
    let (code, overview) = http_get(
        rabbit.management_port(),
        "/api/overview",
        Some("Z3Vlc3Q6Z3Vlc3Q="),
    );
    assert_eq!(code, 200, "{overview}");
    assert!(overview.contains("\"rabbitmq_version\""), "{overview}");
    // Every listener of the node is on loopback (/proc/net/tcp: local address in hex,
    // state 0A = LISTEN), and none is on IPv6.
    let listeners = |table: &str| -> Vec<(String, u16)> {
        fs::read_to_string(table)
            .unwrap_or_default()
            .lines()
            .skip(1)
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let (address, port) = fields.get(1)?.rsplit_once(':')?;
                let port = u16::from_str_radix(port, 16).ok()?;
                (fields.get(3) == Some(&"0A")).then(|| (address.to_string(), port))
            })
            .collect()
    };
    let ipv4 = listeners("/proc/net/tcp");
    let ipv6 = listeners("/proc/net/tcp6");
    for (port, role) in port_layout(moved, false) {
        let addresses: Vec<&str> = ipv4
            .iter()
            .filter(|(_, listening)| *listening == port)
            .map(|(address, _)| address.as_str())
            .collect();
        assert_eq!(addresses, ["0100007F"], "{role} port {port}");
        assert!(
            !ipv6.iter().any(|(_, listening)| *listening == port),
            "{port}"
        );
    }

    // rabbitmqctl reaches the node with the cookie in our folder.
    let ctl = rabbit
        .ctl_command(
            rabbit.bin_dir.as_deref().unwrap(),
            moved,
            &["await_startup"],
        )
        .unwrap()
        .status()
        .unwrap();
    assert!(ctl.success(), "rabbitmqctl await_startup: {ctl}");

    let script = rabbit.read_state().unwrap().script_pid.unwrap();
    assert_ne!(script, status.pid);
    let log = test_support::assert_stops(&rabbit, &status, "stopped TCP listener");
    assert!(log.contains("Server startup complete"), "{log}");
    // The start script (our child here) is reaped, not left a zombie.
    assert!(!Path::new(&format!("/proc/{script}")).exists());
    assert!(!rabbit.state_file().exists());

    // With the port free again, the node comes back on it, with nothing to say.
    drop(foreign);
    let status = test_support::assert_starts(&rabbit, "up (cold start, new database)");
    assert_eq!(status.address, format!("127.0.0.1:{preferred}"));
    assert_eq!(status.note, None);
    assert_eq!(rabbit.down().unwrap(), Some(status.pid));
    let status = test_support::assert_starts(&rabbit, "up (warm start, existing database)");
    let started = Instant::now();
    assert_eq!(rabbit.down().unwrap(), Some(status.pid));
    eprintln!("down: {:?}", started.elapsed());

    // A node that cannot boot fails `up` at once, quoting why: here its database folder
    // is a file.
    let data_dir = rabbit.data_dir();
    fs::remove_dir_all(&data_dir).unwrap();
    fs::write(&data_dir, "not a folder").unwrap();
    let message = test_support::assert_start_fails(&rabbit, Duration::from_secs(30));
    assert!(message.contains("exited"), "{message}");
    assert!(message.contains("cannot_create_mnesia_dir"), "{message}");
    assert!(!rabbit.state_file().exists());
    assert_eq!(rabbit.status().unwrap(), None);
}
