#!/usr/bin/python3
"""An HTTP/2 client in raw frames (hyperframe + hpack, from Debian's
python3-h2) for the cases where h2's state machine stops too early: it keeps
reading after a GOAWAY (the streams below its last-stream-id still finish)
and it records the order frames came in.

    h2_frames_peer.py PORT CMD ARGS...

    drain PIDPATH SLOWPATH   GET PIDPATH, then GET SLOWPATH and wait: prints
                             "pid <body>", "open", then "goaway <code> <last>"
                             when the server says it, then opens one more
                             stream (it must be ignored), then
                             "slow <status> <length> <md5>" (or "slow reset
                             <code> after <length>", or "slow incomplete
                             <length>" when the connection closes first), "late <status|none>" and "closed".
    idle PIDPATH             GET PIDPATH, print "pid <body>" and "ready", then
                             wait: "goaway <code> <last>", "closed".
    seq N PATH               up to N streams of GET PATH, each opened once
                             the one before it ended, until the server says
                             GOAWAY: "answered <count>", then
                             "goaway <code> <last>" and "closed" if it did.
    order PATH1 PRIO1 PATH2 PRIO2 [--rfc7540]
                             GET PATH1 then PATH2 with a zero stream window,
                             each with "priority: PRIO" ("-": none); once the
                             server has both, the windows open in one frame.
                             Prints which stream's DATA came first,
                             "first <path>", whether the second stream's
                             DATA began before the first's ended,
                             "interleaved yes|no", then
                             "<path> <status> <length>" per stream. The
                             client says SETTINGS_NO_RFC7540_PRIORITIES=1
                             unless --rfc7540.
    bodies N PATH            N streams of GET PATH one after the other on
                             one connection: "<i> block <n> body <body>" per
                             stream (n: the bytes of its header block), then
                             "pushes <count of PUSH_PROMISE frames>".
    length PATH LENGTH BODY  POST PATH saying content-length LENGTH, then
                             BODY in one DATA frame with END_STREAM (a
                             BODY "a|b" in two frames, END_STREAM on "b"):
                             "status <code>" for a response, "reset <code>"
                             for a stream the server reset.
    release [--tls] STEP...  on one connection (TLS with ALPN h2 with
                             --tls), in turn: "wait" polls GET /metrics
                             (HTTP/1.1, another connection) until
                             vigil_http2_idle_releases_total has grown and
                             prints "released"; "PATH" or "PATH+N" (with a
                             field "x-pad" of N bytes) is a GET on the
                             connection: "<path> <status> <length> <md5>".
Every wait gives up after 30 seconds ("timeout", exit status 1).
"""

import hashlib
import re
import socket
import ssl
import sys
import time

import hpack
from hyperframe.frame import (DataFrame, Frame, GoAwayFrame, HeadersFrame, PingFrame,
                              PushPromiseFrame, RstStreamFrame, SettingsFrame,
                              WindowUpdateFrame)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def say(line):
    print(line, flush=True)


class RawPeer:
    def __init__(self, port, window=65535, rfc9218=False, tls=False):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        if tls:
            self.sock = tls_context(["h2"]).wrap_socket(self.sock, server_hostname="localhost")
        self.enc = hpack.Encoder()
        self.dec = hpack.Decoder()
        self.buf = b""
        self.streams = {}
        self.order = []  # stream ids in the order their DATA frames came
        self.goaway = None  # (code, last stream id)
        self.pushes = 0  # PUSH_PROMISE frames received
        self.closed = False
        self.auto_window = True
        settings = {SettingsFrame.INITIAL_WINDOW_SIZE: window}
        if rfc9218:
            settings[0x9] = 1  # SETTINGS_NO_RFC7540_PRIORITIES (RFC 9218 section 2.1)
        self.send(PREFACE + SettingsFrame(0, settings=settings).serialize() +
                  WindowUpdateFrame(0, window_increment=1 << 24).serialize())

    def send(self, data):
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            self.closed = True

    def get(self, sid, path, extra=()):
        block = self.enc.encode([(":method", "GET"), (":path", path), (":scheme", "http"),
                                 (":authority", "localhost")] + list(extra))
        self.last_block = len(block)
        self.streams[sid] = {"path": path, "status": None, "body": b"", "done": False,
                             "reset": None}
        self.send(HeadersFrame(sid, data=block, flags=["END_HEADERS", "END_STREAM"]).serialize())

    def frame(self, f):
        st = self.streams.get(f.stream_id)
        if isinstance(f, SettingsFrame):
            if "ACK" not in f.flags:
                self.send(SettingsFrame(0, flags=["ACK"]).serialize())
        elif isinstance(f, PingFrame):
            if "ACK" not in f.flags:
                self.send(PingFrame(0, opaque_data=f.opaque_data, flags=["ACK"]).serialize())
        elif isinstance(f, HeadersFrame) and st is not None:
            for name, value in self.dec.decode(f.data):
                if name in (":status", b":status"):
                    st["status"] = value.decode() if isinstance(value, bytes) else value
            if "END_STREAM" in f.flags:
                st["done"] = True
        elif isinstance(f, DataFrame) and st is not None:
            st["body"] += f.data
            self.order.append(f.stream_id)
            if "END_STREAM" in f.flags:
                st["done"] = True
            if self.auto_window and f.flow_controlled_length > 0:
                self.send(WindowUpdateFrame(0, window_increment=f.flow_controlled_length)
                          .serialize())
                if not st["done"]:
                    self.send(WindowUpdateFrame(f.stream_id,
                                                window_increment=f.flow_controlled_length)
                              .serialize())
        elif isinstance(f, RstStreamFrame) and st is not None:
            st["reset"] = f.error_code
        elif isinstance(f, GoAwayFrame):
            self.goaway = (f.error_code, f.last_stream_id)
            say("goaway %d %d" % self.goaway)
        elif isinstance(f, PushPromiseFrame):
            self.pushes += 1

    def pump(self, until, timeout=30.0):
        """Reads frames until `until()` or the connection closes; False on timeout."""
        deadline = time.monotonic() + timeout
        while not until() and not self.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return False
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.closed = True
                break
            self.buf += chunk
            while len(self.buf) >= 9:
                f, length = Frame.parse_frame_header(memoryview(self.buf[:9]))
                if len(self.buf) < 9 + length:
                    break
                f.parse_body(memoryview(self.buf[9:9 + length]))
                self.buf = self.buf[9 + length:]
                self.frame(f)
        return True

    def done(self, sid):
        st = self.streams[sid]
        return st["done"] or st["reset"] is not None


def tls_context(alpn):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(alpn)
    return ctx


def fail(why):
    say(why)
    sys.exit(1)


def drain(port, pid_path, slow_path):
    p = RawPeer(port)
    p.get(1, pid_path)
    if not p.pump(lambda: p.done(1)):
        fail("timeout")
    say("pid %s" % p.streams[1]["body"].decode().strip())
    p.get(3, slow_path)
    say("open")
    if not p.pump(lambda: p.goaway is not None):
        fail("timeout")
    # A stream the server must not start: it said which streams it serves.
    p.get(5, pid_path)
    if not p.pump(lambda: p.done(3)):
        fail("timeout")
    st = p.streams[3]
    if st["done"]:
        say("slow %s %d %s" % (st["status"], len(st["body"]), hashlib.md5(st["body"]).hexdigest()))
    elif st["reset"] is not None:
        say("slow reset %d after %d" % (st["reset"], len(st["body"])))
    else:
        say("slow incomplete %d" % len(st["body"]))
    if not p.pump(lambda: False):
        fail("timeout")
    say("late %s" % (p.streams[5]["status"] or "none"))
    say("closed")


def idle(port, pid_path):
    p = RawPeer(port)
    p.get(1, pid_path)
    if not p.pump(lambda: p.done(1)):
        fail("timeout")
    say("pid %s" % p.streams[1]["body"].decode().strip())
    say("ready")
    if not p.pump(lambda: False):
        fail("timeout")
    say("closed")


def seq(port, n, path):
    p = RawPeer(port)
    answered = 0
    for i in range(n):
        if p.goaway is not None or p.closed:
            break
        sid = 1 + 2 * i
        p.get(sid, path)
        if not p.pump(lambda: p.done(sid)):
            fail("timeout")
        if p.streams[sid]["status"] == "200" and p.streams[sid]["done"]:
            answered += 1
    say("answered %d" % answered)
    if p.goaway is not None:
        if not p.pump(lambda: False):
            fail("timeout")
        say("closed")


def order(port, path1, prio1, path2, prio2, rfc9218):
    # Stream windows of 0: nothing moves until both requests are in, then
    # both windows open in one write, and the server's scheduler decides.
    p = RawPeer(port, window=0, rfc9218=rfc9218)
    p.auto_window = False
    p.get(1, path1, [("priority", prio1)] if prio1 != "-" else [])
    p.get(3, path2, [("priority", prio2)] if prio2 != "-" else [])
    # The server has both streams once it answered a PING sent after them.
    p.send(PingFrame(0, opaque_data=b"bothsent").serialize())
    acked = []
    orig = p.frame

    def watch(f):
        if isinstance(f, PingFrame) and "ACK" in f.flags:
            acked.append(True)
        orig(f)
    p.frame = watch
    if not p.pump(lambda: acked):
        fail("timeout")
    p.auto_window = True
    p.send(SettingsFrame(0, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 1 << 20}).serialize())
    if not p.pump(lambda: p.done(1) and p.done(3)):
        fail("timeout")
    say("first %s" % (p.streams[p.order[0]]["path"] if p.order else "none"))
    ends = {sid: max(i for i, x in enumerate(p.order) if x == sid) for sid in set(p.order)}
    starts = {sid: p.order.index(sid) for sid in set(p.order)}
    mixed = len(ends) == 2 and starts[3] < ends[1] and starts[1] < ends[3]
    say("interleaved %s" % ("yes" if mixed else "no"))
    for sid in (1, 3):
        st = p.streams[sid]
        say("%s %s %d" % (st["path"], st["status"], len(st["body"])))


def bodies(port, n, path):
    p = RawPeer(port)
    for i in range(n):
        sid = 1 + 2 * i
        p.get(sid, path)
        if not p.pump(lambda: p.done(sid)):
            fail("timeout")
        say("%d block %d body %s" % (i + 1, p.last_block,
                                     p.streams[sid]["body"].decode().strip()))
    # The server has sent all it would for these streams once it answers a PING.
    acked = []
    orig = p.frame

    def watch(f):
        if isinstance(f, PingFrame) and "ACK" in f.flags:
            acked.append(True)
        orig(f)
    p.frame = watch
    p.send(PingFrame(0, opaque_data=b"lastping").serialize())
    if not p.pump(lambda: acked):
        fail("timeout")
    say("pushes %d" % p.pushes)


def length(port, path, declared, body):
    p = RawPeer(port)
    block = p.enc.encode([(":method", "POST"), (":path", path), (":scheme", "http"),
                          (":authority", "localhost"), ("content-length", declared)])
    p.streams[1] = {"path": path, "status": None, "body": b"", "done": False, "reset": None}
    # "a|b": the body in two DATA frames, END_STREAM on the last.
    parts = body.split("|")
    frames = HeadersFrame(1, data=block, flags=["END_HEADERS"]).serialize()
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        frames += DataFrame(1, data=part.encode(), flags=["END_STREAM"] if last else []).serialize()
    p.send(frames)
    if not p.pump(lambda: p.done(1)):
        fail("timeout")
    st = p.streams[1]
    if st["reset"] is not None:
        say("reset %d" % st["reset"])
    else:
        say("status %s" % st["status"])


def metric(port, tls, name):
    """The value of NAME in GET /metrics over HTTP/1.1 (-1 when absent)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    if tls:
        sock = tls_context(["http/1.1"]).wrap_socket(sock, server_hostname="localhost")
    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    sock.close()
    m = re.search(rb"\n" + name.encode() + rb" (\d+)", data)
    return int(m.group(1)) if m else -1


def release(port, steps):
    tls = bool(steps) and steps[0] == "--tls"
    if tls:
        steps = steps[1:]
    p = RawPeer(port, tls=tls)
    name = "vigil_http2_idle_releases_total"
    seen = metric(port, tls, name)
    sid = 1
    for step in steps:
        if step == "wait":
            deadline = time.monotonic() + 30
            while metric(port, tls, name) <= seen:
                if time.monotonic() > deadline:
                    fail("timeout")
                time.sleep(0.05)
            seen = metric(port, tls, name)
            say("released")
            continue
        path, _, pad = step.partition("+")
        p.get(sid, path, [("x-pad", "p" * int(pad))] if pad else [])
        if not p.pump(lambda: p.done(sid)):
            fail("timeout")
        st = p.streams[sid]
        say("%s %s %d %s" % (path, st["status"], len(st["body"]),
                             hashlib.md5(st["body"]).hexdigest()))
        sid += 2


def main(argv):
    port = int(argv[1])
    cmd = argv[2]
    if cmd == "drain":
        drain(port, argv[3], argv[4])
    elif cmd == "idle":
        idle(port, argv[3])
    elif cmd == "seq":
        seq(port, int(argv[3]), argv[4])
    elif cmd == "bodies":
        bodies(port, int(argv[3]), argv[4])
    elif cmd == "length":
        length(port, argv[3], argv[4], argv[5])
    elif cmd == "release":
        release(port, argv[3:])
    elif cmd == "order":
        order(port, argv[3], argv[4], argv[5], argv[6], "--rfc7540" not in argv)
    else:
        fail("unknown command " + cmd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
