"""When each message left the client, read from the wire: a loopback capture (tcpdump) of what
clients send to a broker's port, cut into each connection's byte stream and parsed for publishes
(AMQP 0-9-1 basic.publish, NATS PUB/HPUB to a subject outside $JS. and _INBOX.). Used by
bench/pacing.py to compare how evenly tools pace a fixed rate, whatever each says of itself."""

import math
import os
import re
import signal
import struct
import subprocess
import time

PCAP_MAGIC = {0xA1B2C3D4: 1000, 0xA1B23C4D: 1}  # little-endian pcap: µs or ns timestamps
LINK_HEADER = {1: 14, 113: 16, 276: 20}  # Ethernet (lo), Linux cooked v1 and v2
LARGEST_FRAME = 4 << 20  # an AMQP frame size beyond this means the parse lost its place


class Capture:
    """tcpdump on lo of the segments sent to `port`, into `path`, from start() to stop()."""

    def __init__(self, port, path):
        self.port, self.path, self.child = port, path, None

    def start(self):
        self.child = subprocess.Popen(
            ["tcpdump", "-i", "lo", "-s", "0", "-B", "65536", "-U", "--time-stamp-precision=nano",
             "-w", self.path, f"tcp dst port {self.port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # tcpdump says "listening on lo" once its filter is in place.
        line = self.child.stderr.readline()
        if "listening" not in line:
            self.child.kill()
            raise OSError(f"tcpdump did not start: {line.strip()} (is it installed? apt-get install tcpdump)")
        return self

    def stop(self):
        time.sleep(0.2)  # the last segments, written with -U as they come
        self.child.send_signal(signal.SIGINT)
        _, said = self.child.communicate(timeout=30)
        dropped = re.search(r"(\d+) packets? dropped by kernel", said)
        if not dropped or int(dropped.group(1)) > 0:
            raise ValueError(f"the capture is not whole: tcpdump said {' '.join(said.split())!r}")


def segments(path):
    """(time in ns, source port, sequence number, payload) of every captured IPv4 TCP segment
    that carries data."""
    with open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack_from("<I", data, 0)
    link, = struct.unpack_from("<I", data, 20)
    if magic not in PCAP_MAGIC or link not in LINK_HEADER:
        raise ValueError(f"{path}: not a little-endian pcap of Ethernet or Linux cooked frames "
                         f"(magic {magic:#x}, link type {link})")
    scale, link_header = PCAP_MAGIC[magic], LINK_HEADER[link]
    at = 24
    while at + 16 <= len(data):
        sec, frac, captured, _ = struct.unpack_from("<IIII", data, at)
        packet = data[at + 16:at + 16 + captured]
        at += 16 + captured
        ip = packet[link_header:]
        if len(ip) < 20 or ip[0] >> 4 != 4:
            continue
        tcp = ip[(ip[0] & 0x0F) * 4:struct.unpack_from(">H", ip, 2)[0]]
        payload = tcp[(tcp[12] >> 4) * 4:]
        if payload:
            sport, _, seq = struct.unpack_from(">HHI", tcp, 0)
            yield sec * 1_000_000_000 + frac * scale, sport, seq, payload


def streams(path):
    """Each client connection's bytes in order: {source port: [(time, payload), ...]}, put in
    sequence order (a capture on two cores can hold a connection's segments out of order) with
    bytes seen twice (retransmitted) left out."""
    by_port = {}
    for at, port, seq, payload in segments(path):
        by_port.setdefault(port, []).append((seq, at, payload))
    out = {}
    for port, found in by_port.items():
        first = found[0][0]
        relative = lambda seq: ((seq - first + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)  # noqa: E731
        found.sort(key=lambda s: relative(s[0]))
        chunks, next_at = [], relative(found[0][0])
        for seq, at, payload in found:
            skip = next_at - relative(seq)
            if skip < 0:
                raise ValueError(f"port {port}: {-skip} bytes missing from the capture")
            if skip < len(payload):
                chunks.append((at, payload[skip:]))
                next_at = relative(seq) + len(payload)
        out[port] = chunks
    return out


def amqp_publishes(chunks):
    """Times of the basic.publish frames in one AMQP connection's bytes: each at the segment
    that completed its method frame."""
    buf, times, at_start = b"", [], True
    for at, payload in chunks:
        buf += payload
        if at_start:
            if len(buf) < 8:
                continue
            if buf.startswith(b"AMQP"):
                buf = buf[8:]  # the protocol header
            at_start = False
        pos = 0
        while len(buf) - pos >= 8:
            kind, _, size = struct.unpack_from(">BHI", buf, pos)
            if size > LARGEST_FRAME:
                raise ValueError(f"an AMQP frame of {size} bytes at byte {pos} of a chunk: the parse lost its place")
            if len(buf) - pos < 8 + size:
                break
            if buf[pos + 7 + size] != 0xCE:
                raise ValueError(f"not an AMQP frame at byte {pos} of a chunk: {buf[pos:pos + 16]!r}")
            if kind == 1 and size >= 4 and buf[pos + 7:pos + 11] == b"\x00\x3c\x00\x28":
                times.append(at)
            pos += 8 + size
        buf = buf[pos:]
    return times


def nats_publishes(chunks):
    """Times of the PUB/HPUB messages in one NATS connection's bytes to subjects that are not
    JetStream's API or acks ($JS.) or inboxes (_INBOX.)."""
    buf, times = b"", []
    for at, payload in chunks:
        buf += payload
        pos = 0
        while True:
            end = buf.find(b"\r\n", pos)
            if end < 0:
                if len(buf) - pos > 64 * 1024:
                    raise ValueError(f"no NATS protocol line in 64 KiB: {buf[pos:pos + 32]!r}")
                break
            fields = buf[pos:end].split()
            verb = fields[0].upper() if fields else b""
            if verb in (b"PUB", b"HPUB"):
                total = int(fields[-1])
                if len(buf) < end + 2 + total + 2:
                    break
                if not fields[1].startswith((b"$JS.", b"_INBOX.")):
                    times.append(at)
                pos = end + 2 + total + 2
            else:
                pos = end + 2
        buf = buf[pos:]
    return times


def publish_times(path, protocol):
    """Sorted send times (ns) of every publish in a capture, over all connections."""
    parse = amqp_publishes if protocol == "amqp" else nats_publishes
    times = []
    for chunks in streams(path).values():
        times += parse(chunks)
    return sorted(times)


def pacing(times, start=0.3, end=0.95, second=1_000_000_000):
    """How evenly `times` (ns) were sent between `start` and `end` of their span (leaving out a
    start-up, such as a JVM's first seconds, and the end), second by second: each second's rate,
    and each message's lag behind an even schedule at its second's rate (anchored so that the
    message of the second furthest ahead of it has lag 0), pooled, as p50, p99 and max in µs; and
    the share of messages sent within 20 µs of the one before (in a burst). Second by second, so
    that a rate that wanders over seconds (shown by the slowest and fastest second, a second with
    nothing sent included) is not counted as lateness; a second of fewer than 10 messages gives
    no lags. None when the part is under two seconds long or has no second of 10 messages."""
    if len(times) < 2:
        return None
    span = times[-1] - times[0]
    lo, hi = times[0] + start * span, times[0] + end * span
    part = [t for t in times if lo <= t <= hi]
    seconds = [[t for t in part if lo + k * second <= t < lo + (k + 1) * second]
               for k in range(int((hi - lo) // second))]
    if len(seconds) < 2:
        return None
    lags = []
    for sec in (s for s in seconds if len(s) >= 10):
        gap = slope(sec)
        offsets = [t - (sec[0] + i * gap) for i, t in enumerate(sec)]
        least = min(offsets)
        lags += [o - least for o in offsets]
    if not lags:
        return None
    rates = [len(sec) * 1e9 / second for sec in seconds]
    lags.sort()
    burst = sum(1 for a, b in zip(part, part[1:]) if b - a < 20_000) / (len(part) - 1)
    q = lambda p: lags[max(0, math.ceil(p * len(lags)) - 1)] / 1e3  # noqa: E731
    return {"rate": sum(rates) / len(rates), "slowest": min(rates), "fastest": max(rates),
            "lag_p50": q(0.50), "lag_p99": q(0.99), "lag_max": lags[-1] / 1e3, "burst": burst}


def slope(times):
    """The least-squares time per message of `times` (ns): the rate they were sent at."""
    n = len(times)
    mean_i, mean_t = (n - 1) / 2, sum(times) / n
    num = sum((i - mean_i) * (t - mean_t) for i, t in enumerate(times))
    return num / sum((i - mean_i) ** 2 for i in range(n))


def remove(path):
    try:
        os.remove(path)
    except OSError:
        pass
