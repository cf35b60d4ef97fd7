use super::*;
use std::io::{Read, Write};
use std::net::TcpListener;

use crate::probe::{BrokerInfo, Opened};
use crate::wire::Publisher;

const FRAME_MAX: u32 = 4096 + wire::FRAME_OVERHEAD as u32;

/// A session over loopback whose other end the test plays as the broker.
fn pair() -> (Arc<Session>, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    let opened = Opened {
        stream: client,
        info: BrokerInfo {
            product: "test".into(),
            version: String::new(),
        },
        frame_max: FRAME_MAX,
        channel_max: 0,
        heartbeat: 0,
    };
    let session = Session::start(opened, "test".into()).unwrap();
    (Arc::new(session), server)
}

/// Reads one frame from the broker's side: (kind, channel, payload).
fn read_frame(server: &mut TcpStream) -> (u8, u16, Vec<u8>) {
    let mut header = [0u8; 7];
    server.read_exact(&mut header).unwrap();
    let size = u32::from_be_bytes(header[3..7].try_into().unwrap()) as usize;
    let mut payload = vec![0; size + 1];
    server.read_exact(&mut payload).unwrap();
    assert_eq!(payload.pop(), Some(wire::FRAME_END));
    (
        header[0],
        u16::from_be_bytes([header[1], header[2]]),
        payload,
    )
}

fn method_of(payload: &[u8]) -> (u16, u16) {
    Reader::new(payload).method_id().unwrap()
}

/// Writes `bytes` in pieces of `step` bytes, pausing between them, so the client reads
/// frames cut anywhere.
fn dribble(server: &mut TcpStream, bytes: &[u8], step: usize) {
    for piece in bytes.chunks(step) {
        server.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn content(out: &mut Vec<u8>, channel: u16, body: &[u8]) {
    let start = wire::begin_frame(out, FRAME_HEADER, channel);
    out.extend_from_slice(&[0, 60, 0, 0]);
    out.extend_from_slice(&(body.len() as u64).to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    wire::end_frame(out, start);
    for chunk in body.chunks(4096) {
        let start = wire::begin_frame(out, FRAME_BODY, channel);
        out.extend_from_slice(chunk);
        wire::end_frame(out, start);
    }
}

fn deliver(out: &mut Vec<u8>, channel: u16, tag: u64, body: &[u8]) {
    wire::method(out, channel, id::BASIC_DELIVER, |out| {
        wire::put_short_string(out, "ctag");
        out.extend_from_slice(&tag.to_be_bytes());
        out.push(0);
        wire::put_short_string(out, "ex");
        wire::put_short_string(out, "key");
    });
    content(out, channel, body);
}

/// Opens a channel, lets the test's broker send `frames` on it (cut every 3 bytes), and
/// returns why the channel ended: a broker that breaks the protocol loses its connection.
fn ended_by(frames: impl FnOnce(u16) -> Vec<u8> + Send + 'static) -> (&'static str, String) {
    let (session, mut server) = pair();
    let broker = std::thread::spawn(move || {
        let (_, channel, _) = read_frame(&mut server);
        let mut out = Vec::new();
        wire::method(&mut out, channel, id::CHANNEL_OPEN_OK, |out| {
            out.extend_from_slice(&[0; 4])
        });
        out.extend(frames(channel));
        dribble(&mut server, &out, 3);
        server
    });
    let channel = session.channel().unwrap();
    assert!(
        session.wait(channel.state(), Duration::from_secs(10), &|i| i
            .ended
            .is_some()),
        "the channel did not end"
    );
    let _server = broker.join().unwrap();
    assert!(
        channel.state().inbox().deliveries.is_empty(),
        "nothing delivered"
    );
    channel.ended().unwrap()
}

#[test]
fn a_broker_that_breaks_the_protocol_loses_its_connection_with_the_reason() {
    let header = |out: &mut Vec<u8>, channel: u16, size: u64| {
        let start = wire::begin_frame(out, FRAME_HEADER, channel);
        out.extend_from_slice(&[0, 60, 0, 0]);
        out.extend_from_slice(&size.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        wire::end_frame(out, start);
    };
    let body = |out: &mut Vec<u8>, channel: u16, bytes: &[u8]| {
        let start = wire::begin_frame(out, FRAME_BODY, channel);
        out.extend_from_slice(bytes);
        wire::end_frame(out, start);
    };
    let deliver_method = |out: &mut Vec<u8>, channel: u16| {
        wire::method(out, channel, id::BASIC_DELIVER, |out| {
            wire::put_short_string(out, "ctag");
            out.extend_from_slice(&7u64.to_be_bytes());
            out.push(0);
            wire::put_short_string(out, "ex");
            wire::put_short_string(out, "key");
        });
    };
    for (frames, says) in [
        (
            Box::new(move |channel| {
                let mut out = Vec::new();
                deliver_method(&mut out, channel);
                body(&mut out, channel, b"early");
                out
            }) as Box<dyn FnOnce(u16) -> Vec<u8> + Send>,
            "a body frame before its content header",
        ),
        (
            Box::new(move |channel| {
                let mut out = Vec::new();
                deliver_method(&mut out, channel);
                header(&mut out, channel, 4);
                body(&mut out, channel, b"more than four");
                out
            }),
            "14 body bytes for content of 4",
        ),
        (
            Box::new(move |channel| {
                let mut out = Vec::new();
                deliver_method(&mut out, channel);
                header(&mut out, channel, 1 << 40);
                out
            }),
            "announcing 1099511627776 bytes",
        ),
        (
            Box::new(move |channel| {
                let mut out = Vec::new();
                wire::method(&mut out, channel, id::BASIC_ACK, |out| {
                    out.extend_from_slice(&[0, 0, 1])
                });
                out
            }),
            "a confirm without its delivery tag",
        ),
        (
            Box::new(move |channel| {
                let mut out = Vec::new();
                wire::method(&mut out, channel, id::BASIC_DELIVER, |out| {
                    wire::put_short_string(out, "ctag");
                    out.extend_from_slice(&[0, 0]);
                });
                out
            }),
            "a delivery without its delivery tag",
        ),
        (
            Box::new(move |channel| {
                // A body frame announcing more than frame_max (only its header is sent:
                // the client must not wait for the rest).
                let mut out = vec![FRAME_BODY];
                out.extend_from_slice(&channel.to_be_bytes());
                out.extend_from_slice(&(FRAME_MAX + 1).to_be_bytes());
                out
            }),
            "larger than the frame_max",
        ),
        (
            Box::new(move |channel| {
                let mut out = Vec::new();
                deliver_method(&mut out, channel);
                // The frame-end byte of the method frame replaced.
                *out.last_mut().unwrap() = 0xAB;
                out
            }),
            "without the frame-end byte",
        ),
    ] {
        let (kind, reason) = ended_by(frames);
        assert_eq!(kind, CONNECTION_CLOSED, "{reason}");
        assert!(
            (reason.contains("broke the protocol") || reason.contains("not an AMQP broker"))
                && reason.contains(says),
            "{reason} / {says}"
        );
    }
}

#[test]
fn a_connection_close_from_the_broker_is_answered_and_ends_every_channel_with_its_code() {
    let (session, mut server) = pair();
    let broker = std::thread::spawn(move || {
        let mut numbers = Vec::new();
        let mut out = Vec::new();
        for _ in 0..2 {
            let (_, channel, _) = read_frame(&mut server);
            numbers.push(channel);
            wire::method(&mut out, channel, id::CHANNEL_OPEN_OK, |out| {
                out.extend_from_slice(&[0; 4])
            });
            server.write_all(&out).unwrap();
            out.clear();
        }
        wire::close(
            &mut out,
            0,
            id::CONNECTION_CLOSE,
            "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'",
        );
        // close() writes reply code 200: the broker's is 320.
        let code_at = 7 + 4;
        out[code_at..code_at + 2].copy_from_slice(&320u16.to_be_bytes());
        dribble(&mut server, &out, 5);
        // The client answers with connection.close-ok before it lets go.
        let (kind, channel, payload) = read_frame(&mut server);
        assert_eq!((kind, channel), (FRAME_METHOD, 0));
        assert_eq!(method_of(&payload), id::CONNECTION_CLOSE_OK);
    });
    let channels = [session.channel().unwrap(), session.channel().unwrap()];
    for channel in &channels {
        assert!(
            session.wait(channel.state(), Duration::from_secs(10), &|i| i
                .ended
                .is_some())
        );
        let (kind, reason) = channel.ended().unwrap();
        assert_eq!(kind, CONNECTION_CLOSED);
        assert!(
            reason.contains("320") && reason.contains("CONNECTION_FORCED"),
            "{reason}"
        );
    }
    broker.join().unwrap();
}

#[test]
fn a_consumer_that_does_not_take_its_deliveries_holds_back_the_shared_connection() {
    let (session, mut server) = pair();
    let sent = Arc::new(AtomicUsize::new(0));
    let counted = sent.clone();
    let broker = std::thread::spawn(move || {
        let mut numbers = Vec::new();
        for _ in 0..2 {
            let (_, channel, _) = read_frame(&mut server);
            numbers.push(channel);
            let mut out = Vec::new();
            wire::method(&mut out, channel, id::CHANNEL_OPEN_OK, |out| {
                out.extend_from_slice(&[0; 4])
            });
            server.write_all(&out).unwrap();
        }
        // Deliveries for the second channel only, as fast as the socket takes them,
        // until the client lets go (64 MiB at most).
        let body = vec![7u8; 64 * 1024];
        let mut out = Vec::new();
        for tag in 1..=1024u64 {
            out.clear();
            deliver(&mut out, numbers[1], tag, &body);
            if server.write_all(&out).is_err() {
                break;
            }
            counted.fetch_add(body.len(), Ordering::Relaxed);
        }
    });
    let quiet = session.channel().unwrap();
    let flooded = session.channel().unwrap();
    // The first channel's consumer reads for both for a second; the second's never polls.
    assert!(!session.wait(quiet.state(), Duration::from_secs(1), &|i| !i
        .deliveries
        .is_empty()));
    let held = flooded.state().inbox().deliveries.bytes();
    assert!(held >= demux::INBOX_LIMIT, "held {held}");
    // What one read can bring beyond the limit, and no more.
    assert!(
        held <= demux::INBOX_LIMIT + READ_CHUNK.max(2 * FRAME_MAX as usize),
        "held {held}"
    );
    assert!(
        sent.load(Ordering::Relaxed) < 64 << 20,
        "the broker was held back"
    );
    // Once the second consumer takes its deliveries, reading goes on.
    flooded.state().inbox().deliveries.clear();
    session.wait(quiet.state(), Duration::from_millis(300), &|_| false);
    assert!(flooded.state().inbox().deliveries.bytes() > 0);
    drop((quiet, flooded, session));
    broker.join().unwrap();
}

#[test]
fn a_consumer_cancelled_by_the_broker_is_told_to_its_channel() {
    let (session, mut server) = pair();
    let broker = std::thread::spawn(move || {
        let (_, channel, _) = read_frame(&mut server);
        let mut out = Vec::new();
        wire::method(&mut out, channel, id::CHANNEL_OPEN_OK, |out| {
            out.extend_from_slice(&[0; 4])
        });
        // basic.cancel: consumer tag, no-wait (the queue was deleted).
        wire::method(&mut out, channel, id::BASIC_CANCEL, |out| {
            wire::put_short_string(out, "ctag");
            out.push(1);
        });
        dribble(&mut server, &out, 2);
        server
    });
    let channel = session.channel().unwrap();
    assert!(
        session.wait(channel.state(), Duration::from_secs(10), &|i| i.cancelled),
        "the cancel was not told"
    );
    assert!(
        channel.ended().is_none(),
        "a cancel leaves the channel open"
    );
    drop(broker.join().unwrap());
}

#[test]
fn random_bytes_from_the_broker_end_the_connection_with_a_reason() {
    for seed in 1..=5u64 {
        let (kind, reason) = ended_by(move |_| {
            let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            (0..1_500)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        });
        assert_eq!(kind, CONNECTION_CLOSED, "seed {seed}: {reason}");
    }
}

#[test]
fn deliveries_cut_anywhere_are_put_together_and_a_broker_close_ends_the_channel() {
    let (session, mut server) = pair();
    let broker = std::thread::spawn(move || {
        let (kind, channel, payload) = read_frame(&mut server);
        assert_eq!(
            (kind, method_of(&payload)),
            (FRAME_METHOD, id::CHANNEL_OPEN)
        );
        let mut out = Vec::new();
        wire::method(&mut out, channel, id::CHANNEL_OPEN_OK, |out| {
            out.extend_from_slice(&[0; 4])
        });
        let big: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        deliver(&mut out, channel, 1, &big);
        deliver(&mut out, channel, 2, b"");
        deliver(&mut out, channel, 3, b"small");
        dribble(&mut server, &out, 997);
        // The client acknowledges what it received, in one write.
        let acks: Vec<_> = (0..2).map(|_| read_frame(&mut server)).collect();
        let mut out = Vec::new();
        wire::method(&mut out, channel, id::CHANNEL_CLOSE, |out| {
            out.extend_from_slice(&404u16.to_be_bytes());
            wire::put_short_string(out, "NOT_FOUND - no queue 'q'");
            out.extend_from_slice(&[0, 60, 0, 20]);
        });
        server.write_all(&out).unwrap();
        let (_, _, close_ok) = read_frame(&mut server);
        // Nothing of the channel may follow its close-ok.
        server
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut after = [0u8; 1];
        let more = server.read(&mut after);
        (big, acks, method_of(&close_ok), more, server)
    });
    let channel = session.channel().unwrap();
    let mut got = Vec::new();
    let mut out = Vec::new();
    let started = Instant::now();
    while got.len() < 3 && started.elapsed() < Duration::from_secs(10) {
        session.wait(channel.state(), Duration::from_millis(100), &|i| {
            !i.deliveries.is_empty()
        });
        let mut inbox = channel.state().inbox();
        for (tag, body) in inbox.deliveries.iter() {
            got.push((tag, body.to_vec()));
            if tag != 2 {
                wire::basic_ack(&mut out, channel.number(), tag, false);
            }
        }
        inbox.deliveries.clear();
    }
    session.write(&mut out).unwrap();
    assert!(
        session.wait(channel.state(), Duration::from_secs(10), &|i| i
            .ended
            .is_some())
    );
    let mut late = Vec::new();
    wire::basic_ack(&mut late, channel.number(), 3, false);
    assert_eq!(channel.write(&mut late), Err(CHANNEL_CLOSED));
    let (big, acks, close_ok, more, _server) = broker.join().unwrap();
    assert!(
        more.as_ref()
            .is_err_and(|e| e.kind() == io::ErrorKind::WouldBlock),
        "{more:?}"
    );
    assert_eq!(got.len(), 3);
    assert_eq!(got[0], (1, big));
    assert_eq!(got[1], (2, Vec::new()));
    assert_eq!(got[2], (3, b"small".to_vec()));
    let acked: Vec<u64> = acks
        .iter()
        .map(|(_, _, p)| {
            let mut r = Reader::new(p);
            assert_eq!(r.method_id(), Some(id::BASIC_ACK));
            r.u64().unwrap()
        })
        .collect();
    assert_eq!(acked, vec![1, 3]);
    assert_eq!(close_ok, id::CHANNEL_CLOSE_OK);
    let (kind, reason) = channel.ended().unwrap();
    assert_eq!(kind, CHANNEL_CLOSED);
    assert!(reason.contains("404 NOT_FOUND"), "{reason}");
}

#[test]
fn confirms_and_returns_reach_a_waiting_producer_and_a_lost_connection_ends_every_channel() {
    let (session, mut server) = pair();
    let (wrote, written) = std::sync::mpsc::channel();
    let broker = std::thread::spawn(move || {
        let (_, channel, _) = read_frame(&mut server);
        let mut out = Vec::new();
        wire::method(&mut out, channel, id::CHANNEL_OPEN_OK, |out| {
            out.extend_from_slice(&[0; 4])
        });
        server.write_all(&out).unwrap();
        // Two publishes arrive as method, header and body frames.
        let frames: Vec<_> = (0..6).map(|_| read_frame(&mut server)).collect();
        std::thread::sleep(Duration::from_millis(50));
        let mut out = Vec::new();
        wire::method(&mut out, channel, id::BASIC_RETURN, |out| {
            out.extend_from_slice(&312u16.to_be_bytes());
            wire::put_short_string(out, "NO_ROUTE");
            wire::put_short_string(out, "ex");
            wire::put_short_string(out, "key");
        });
        content(&mut out, channel, &frames[5].2);
        wire::method(&mut out, channel, id::BASIC_ACK, |out| {
            out.extend_from_slice(&2u64.to_be_bytes());
            out.push(1);
        });
        server.write_all(&out).unwrap();
        wrote.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        drop(server);
        frames
    });
    let channel = session.channel().unwrap();
    let publisher = Publisher::new(channel.number(), "ex", "key", true, false, &[], FRAME_MAX);
    let mut out = Vec::new();
    for sequence in 0..2 {
        let mut body = vec![0; 30];
        Envelope {
            producer: 7,
            sequence,
            intended_ns: 5,
        }
        .write(&mut body);
        publisher.publish(&mut out, &body);
    }
    session.write(&mut out).unwrap();
    let before = Clock::process().now_ns();
    // The producer sleeps past the confirm's arrival (50 ms after the publishes, later on a busy
    // host: the broker says when it wrote it) and reads it then: it keeps the time it arrived.
    written.recv().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let read_at = Clock::process().now_ns();
    assert!(
        session.wait(channel.state(), Duration::from_secs(10), &|i| i
            .events
            .len()
            >= 2)
    );
    let events = std::mem::take(&mut channel.state().inbox().events);
    match &events[..] {
        [ChannelEvent::Returned(envelope), ChannelEvent::Confirm {
            tag: 2,
            multiple: true,
            ack: true,
            at_ns,
        }] => {
            assert_eq!((envelope.producer, envelope.sequence), (7, 1));
            assert!(*at_ns >= before + 40_000_000, "stamped before its arrival");
            assert!(
                *at_ns + 100_000_000 <= read_at,
                "stamped {} ms after the write, when it was read, not on arrival",
                (at_ns - before) as f64 / 1e6
            );
        }
        other => panic!("{other:?}"),
    }
    let frames = broker.join().unwrap();
    let kinds: Vec<u8> = frames.iter().map(|f| f.0).collect();
    assert_eq!(kinds, [FRAME_METHOD, FRAME_HEADER, FRAME_BODY].repeat(2));
    assert!(
        session.wait(channel.state(), Duration::from_secs(10), &|i| i
            .ended
            .is_some())
    );
    assert_eq!(channel.ended().unwrap().0, CONNECTION_CLOSED);
    assert!(!session.is_open());
    let mut more = vec![1];
    assert_eq!(session.write(&mut more), Err(CONNECTION_CLOSED));
}
