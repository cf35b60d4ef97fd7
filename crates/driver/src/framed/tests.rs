use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use super::*;

/// Lines of text; a line starting with `!` is no frame.
struct Lines;

impl Framing for Lines {
    type Frame<'a> = &'a [u8];

    fn next(bytes: &[u8]) -> Result<Option<(&[u8], usize)>, String> {
        match bytes.iter().position(|&b| b == b'\n') {
            Some(_) if bytes[0] == b'!' => Err("malformed_line".into()),
            Some(end) => Ok(Some((&bytes[..end], end + 1))),
            None => Ok(None),
        }
    }
}

/// A connection and the peer at its other end.
fn pair() -> (Framed, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let ours = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (peer, _) = listener.accept().unwrap();
    (Framed::new(ours), peer)
}

/// Polls until `n` frames came (at most 5 s), answering each with `ok <frame>`.
fn frames(conn: &mut Framed, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    while got.len() < n && Instant::now() < deadline {
        conn.poll::<Lines>(Duration::from_millis(100), &mut |line, out| {
            out.extend_from_slice(b"ok ");
            out.extend_from_slice(line);
            out.push(b'\n');
            got.push(String::from_utf8_lossy(line).into_owned());
            Ok(())
        })
        .unwrap();
    }
    got
}

#[test]
fn whole_frames_are_handed_on_and_what_the_handler_writes_is_sent() {
    let (mut conn, mut peer) = pair();
    peer.write_all(b"one\ntw").unwrap();
    assert_eq!(frames(&mut conn, 1), ["one"]);
    assert!(conn.last_read().get() > 0, "the read is stamped");
    peer.write_all(b"o\nthree\n").unwrap();
    assert_eq!(frames(&mut conn, 2), ["two", "three"]);
    let mut answers = [0u8; 19];
    peer.read_exact(&mut answers).unwrap();
    assert_eq!(&answers, b"ok one\nok two\nok th");
}

#[test]
fn a_quiet_poll_waits_and_hands_on_nothing() {
    let (mut conn, _peer) = pair();
    let started = Instant::now();
    let handled = conn
        .poll::<Lines>(Duration::from_millis(50), &mut |_, _| Ok(()))
        .unwrap();
    assert_eq!(handled, 0);
    assert!(started.elapsed() >= Duration::from_millis(40));
}

#[test]
fn a_closed_peer_a_bad_frame_and_a_refused_one_end_the_poll_with_their_kind() {
    let (mut conn, mut peer) = pair();
    peer.write_all(b"keep\n").unwrap();
    let refused = frames_refused(&mut conn);
    assert_eq!(refused, "refused");
    assert_eq!(
        frames(&mut conn, 1),
        ["keep"],
        "a refused frame stays unread"
    );
    peer.write_all(b"!bad\n").unwrap();
    let bad = conn.poll::<Lines>(Duration::from_secs(5), &mut |_, _| Ok(()));
    assert_eq!(bad.unwrap_err(), "malformed_line");
    let (mut conn, peer) = pair();
    drop(peer);
    let closed = conn.poll::<Lines>(Duration::from_secs(5), &mut |_, _| Ok(()));
    assert_eq!(closed.unwrap_err(), CONNECTION_CLOSED);
}

/// The error of a poll whose handler refuses the frame.
fn frames_refused(conn: &mut Framed) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let polled = conn.poll::<Lines>(Duration::from_millis(100), &mut |_, _| {
            Err("refused".to_string())
        });
        match polled {
            Err(kind) => return kind,
            Ok(_) if Instant::now() < deadline => {}
            Ok(_) => panic!("nothing came"),
        }
    }
}
