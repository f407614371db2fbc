#!/usr/bin/python3
"""An HTTP/2 client for the integration tests, on Python's h2 library
(Debian's python3-h2): frame-level cases curl and nghttp do not make.

    h2_peer.py PORT [--tls CA] [--window N] [--read-delay MS] CMD ARGS...

    get PATH...               every PATH as a stream of one connection, at once
    post PATH SIZE [--no-length] [--chunk N]
                              a body of SIZE bytes ('a'..'z' repeated)
    cookies PATH              two cookie fields: "a=1" and "b=2"
    reset-flood N PATH        N streams opened and reset at once, then GET PATH
    continuation-flood PATH   HEADERS then CONTINUATION frames without end
    headers-bomb PATH N       one header field referenced N times (HPACK)
    ping-flood N PATH         N PINGs without reading, then GET PATH
    settings-flood N PATH     N SETTINGS without reading, then GET PATH
    stall PATH                a zero window: the response waits, reads nothing

Prints one line per stream: "<path> <status> <body length> <md5 of body>"
plus, for a response, "h <name>: <value>" lines before it with --headers
(and "t <name>: <value>" for its trailers);
"reset <path> <code>" for a stream the server reset; "goaway <code>" when the
server ends the connection. Exit status 0 unless the connection failed.
"""

import hashlib
import socket
import ssl
import struct
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.settings


def body_bytes(size):
    pattern = b"abcdefghijklmnopqrstuvwxyz"
    return (pattern * (size // len(pattern) + 1))[:size]


class Peer:
    def __init__(self, port, ca=None, window=None):
        self.port = port
        self.ca = ca
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        if ca is not None:
            ctx = ssl.create_default_context(cafile=ca)
            ctx.set_alpn_protocols(["h2"])
            self.sock = ctx.wrap_socket(raw, server_hostname="localhost")
            if self.sock.selected_alpn_protocol() != "h2":
                raise SystemExit("alpn: %r" % self.sock.selected_alpn_protocol())
            self.scheme = "https"
        else:
            self.sock = raw
            self.scheme = "http"
        cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config=cfg)
        self.conn.initiate_connection()
        if window is not None:
            self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        self.flush()
        self.streams = {}
        self.goaway = None
        self.auto_ack = True
        self.pinged = False

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def headers(self, path, method="GET", extra=()):
        return [(":method", method), (":path", path), (":scheme", self.scheme),
                (":authority", "localhost")] + list(extra)

    def request(self, path, method="GET", body=None, length=True, extra=()):
        sid = self.conn.get_next_available_stream_id()
        hdrs = self.headers(path, method, extra)
        if body is not None and length:
            hdrs.append(("content-length", str(len(body))))
        self.conn.send_headers(sid, hdrs, end_stream=body is None)
        self.streams[sid] = {"path": path, "status": None, "headers": [], "body": b"",
                             "done": False, "reset": None, "send": body or b""}
        self.flush()
        return sid

    def push_bodies(self):
        for sid, st in self.streams.items():
            while st["send"] and not st["done"] and st["reset"] is None:
                try:
                    room = min(self.conn.local_flow_control_window(sid),
                               self.conn.max_outbound_frame_size)
                except Exception:
                    break
                if room <= 0:
                    break
                piece, st["send"] = st["send"][:room], st["send"][room:]
                self.conn.send_data(sid, piece, end_stream=not st["send"])
        self.flush()

    def pump(self, timeout=10.0, until=None):
        deadline = time.monotonic() + timeout
        until = until or (lambda: all(s["done"] or s["reset"] is not None
                                      for s in self.streams.values()))
        while not until() and self.goaway is None:
            self.push_bodies()
            left = deadline - time.monotonic()
            if left <= 0:
                raise SystemExit("timeout")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                raise SystemExit("timeout")
            if not data:
                break
            for ev in self.conn.receive_data(data):
                self.event(ev)
            self.flush()

    def event(self, ev):
        if isinstance(ev, h2.events.ResponseReceived):
            st = self.streams[ev.stream_id]
            st["headers"] = ev.headers
            st["status"] = dict(ev.headers)[":status"]
        elif isinstance(ev, h2.events.InformationalResponseReceived):
            pass
        elif isinstance(ev, h2.events.TrailersReceived):
            self.streams[ev.stream_id]["trailers"] = ev.headers
        elif isinstance(ev, h2.events.DataReceived):
            self.streams[ev.stream_id]["body"] += ev.data
            if self.auto_ack:
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            self.streams[ev.stream_id]["done"] = True
        elif isinstance(ev, h2.events.StreamReset):
            if ev.stream_id in self.streams:
                self.streams[ev.stream_id]["reset"] = ev.error_code
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.goaway = ev.error_code
        elif isinstance(ev, h2.events.PingAckReceived):
            self.pinged = True

    def report(self, show_headers=False):
        for sid in sorted(self.streams):
            st = self.streams[sid]
            if st["reset"] is not None and not st["done"]:
                print("reset %s %d" % (st["path"], int(st["reset"])))
                continue
            if show_headers:
                for k, v in st["headers"]:
                    print("h %s: %s" % (k, v))
                for k, v in st.get("trailers", []):
                    print("t %s: %s" % (k, v))
            print("%s %s %d %s" % (st["path"], st["status"], len(st["body"]),
                                   hashlib.md5(st["body"]).hexdigest()))
        if self.goaway is not None:
            print("goaway %d" % int(self.goaway))


def raw_frames(frames):
    return b"".join(f.serialize() for f in frames)


def flood(p, cmd, args):
    """Sends the attack's frames, then reads until the server closes the
    connection or answers; prints "closed <goaway code or -1>" or the
    stream's result, and "served" when a new connection still gets a 200."""
    from hyperframe.frame import (ContinuationFrame, DataFrame, HeadersFrame, PingFrame,
                                  SettingsFrame)
    import hpack
    n = int(args[1])
    path = args[2]
    enc = hpack.Encoder()
    base = [(":method", "GET"), (":path", path), (":scheme", p.scheme),
            (":authority", "localhost")]
    data = b""
    if cmd == "ping-flood":
        data = raw_frames(PingFrame(0, opaque_data=b"12345678") for _ in range(n))
    elif cmd == "settings-flood":
        data = raw_frames(SettingsFrame(0, settings={0x4: 65535}) for _ in range(n))
    elif cmd == "continuation-flood":
        first = HeadersFrame(1, data=enc.encode(base))
        filler = enc.encode([("x-filler", "v" * 100)], huffman=False)
        data = first.serialize() + raw_frames(ContinuationFrame(1, data=filler) for _ in range(n))
    elif cmd == "headers-bomb":
        block = enc.encode(base + [("x-bomb", "a" * 4000)]) + b"\xbe" * n
        data = HeadersFrame(1, data=block, flags=["END_HEADERS", "END_STREAM"]).serialize()
    elif cmd == "empty-data-flood":
        head = HeadersFrame(1, data=enc.encode(base + [("content-length", "1")]),
                            flags=["END_HEADERS"]).serialize()
        data = head + raw_frames(DataFrame(1, data=b"") for _ in range(n))
    result = None
    try:
        p.sock.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        # The server closed the connection before it had all of the attack
        # (a reset while sending): the same answer as a close read later.
        result = "closed"
    # h2's state machine did not see these frames: read the raw answer.
    deadline = time.monotonic() + 10
    got = b""
    while result is None and time.monotonic() < deadline:
        p.sock.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            chunk = p.sock.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            result = "closed"
            break
        got += chunk
        # GOAWAY (type 7) or RST_STREAM (type 3) or a response HEADERS (type 1)
        at = 0
        while at + 9 <= len(got):
            length = int.from_bytes(got[at:at + 3], "big")
            ftype = got[at + 3]
            if at + 9 + length > len(got):
                break
            payload = got[at + 9:at + 9 + length]
            if ftype == 7:
                result = "goaway %d" % int.from_bytes(payload[4:8], "big")
            elif ftype == 3 and result is None:
                result = "reset %d" % int.from_bytes(payload[0:4], "big")
            elif ftype == 1 and result is None:
                dec = hpack.Decoder()
                try:
                    hdrs = dict(dec.decode(payload))
                    result = "status %s" % hdrs.get(":status", hdrs.get(b":status"))
                except Exception:
                    result = "status ?"
            at += 9 + length
    print(result or "no answer")
    q = Peer(p.port, p.ca)
    q.request(path)
    q.pump()
    st = q.streams[1]
    print("served" if st["status"] == "200" else "not served %s" % st["status"])


def reset_batches(p, batches, n, path):
    """BATCHES rounds of N streams opened and reset, in raw frames, each
    round read by the server (its PING answered) before the next. Prints
    "goaway <code>" if the server ended the connection, else "rounds done"."""
    from hyperframe.frame import HeadersFrame, PingFrame, RstStreamFrame
    import hpack
    enc = hpack.Encoder()
    base = [(":method", "GET"), (":path", path), (":scheme", p.scheme),
            (":authority", "localhost")]
    sid = 1
    got = b""
    for _ in range(batches):
        frames = []
        for _ in range(n):
            frames.append(HeadersFrame(sid, data=enc.encode(base),
                                       flags=["END_HEADERS", "END_STREAM"]))
            frames.append(RstStreamFrame(sid, error_code=8))
            sid += 2
        frames.append(PingFrame(0, opaque_data=b"roundend"))
        try:
            p.sock.sendall(raw_frames(frames))
        except (BrokenPipeError, ConnectionResetError):
            print("closed")
            return
        acked = False
        deadline = time.monotonic() + 10
        while not acked:
            left = deadline - time.monotonic()
            if left <= 0:
                print("timeout")
                return
            p.sock.settimeout(left)
            try:
                chunk = p.sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                print("closed")
                return
            got += chunk
            while len(got) >= 9:
                length = int.from_bytes(got[:3], "big")
                if len(got) < 9 + length:
                    break
                ftype, flags, payload = got[3], got[4], got[9:9 + length]
                got = got[9 + length:]
                if ftype == 7:
                    print("goaway %d" % int.from_bytes(payload[4:8], "big"))
                    return
                if ftype == 6 and flags & 1 and payload == b"roundend":
                    acked = True
    print("rounds done")


def bad_preface(port):
    """The preface, then a SETTINGS acknowledgement and a request, without
    the SETTINGS frame RFC 9113 section 3.4 says must follow the preface."""
    from hyperframe.frame import HeadersFrame, SettingsFrame
    import hpack
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    block = hpack.Encoder().encode([(":method", "GET"), (":path", "/"), (":scheme", "http"),
                                    (":authority", "localhost")])
    sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" +
                 SettingsFrame(0, flags=["ACK"]).serialize() +
                 HeadersFrame(1, data=block, flags=["END_HEADERS", "END_STREAM"]).serialize())
    got = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (socket.timeout, ConnectionResetError):
            chunk = b""
        if not chunk:
            break
        got += chunk
    at = 0
    while at + 9 <= len(got):
        length = int.from_bytes(got[at:at + 3], "big")
        if got[at + 3] == 7:
            print("goaway %d" % int.from_bytes(got[at + 13:at + 17], "big"))
        elif got[at + 3] == 1:
            print("headers")
        at += 9 + length


def main(argv):
    port = int(argv[1])
    if argv[2] == "bad-preface":
        bad_preface(port)
        return 0
    args = argv[2:]
    ca = None
    window = None
    show_headers = False
    if "--tls" in args:
        i = args.index("--tls")
        ca = args[i + 1]
        del args[i:i + 2]
    if "--window" in args:
        i = args.index("--window")
        window = int(args[i + 1])
        del args[i:i + 2]
    if "--headers" in args:
        args.remove("--headers")
        show_headers = True
    cmd = args[0]
    p = Peer(port, ca, window)
    if cmd == "get":
        for path in args[1:]:
            p.request(path)
        p.pump()
    elif cmd == "head":
        p.request(args[1], method="HEAD")
        p.pump()
    elif cmd == "post":
        length = "--no-length" not in args
        p.request(args[1], method="POST", body=body_bytes(int(args[2])), length=length)
        p.pump(timeout=20)
    elif cmd == "cookies":
        p.request(args[1], extra=[("cookie", "a=1"), ("accept", "*/*"), ("cookie", "b=2")])
        p.pump()
    elif cmd == "reset-flood":
        n = int(args[1])
        for _ in range(n):
            sid = p.conn.get_next_available_stream_id()
            p.conn.send_headers(sid, p.headers(args[2]), end_stream=True)
            p.conn.reset_stream(sid)
        p.flush()
        p.request(args[2])
        p.pump()
    elif cmd == "reset-batches":
        reset_batches(p, int(args[1]), int(args[2]), args[3])
        return 0
    elif cmd == "stall":
        # A zero window (set before the request): the response cannot move.
        p.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
        p.flush()
        p.auto_ack = False
        p.request(args[1])
        p.pump(timeout=float(args[2]) if len(args) > 2 else 10)
    elif cmd in ("ping-flood", "settings-flood", "continuation-flood", "headers-bomb",
                 "empty-data-flood"):
        flood(p, cmd, args)
        return 0
    elif cmd == "streams":
        # More concurrent streams than the server allows, each waiting.
        n = int(args[1])
        for _ in range(n):
            p.request(args[2])
        p.pump(timeout=20)
    else:
        raise SystemExit("unknown command " + cmd)
    p.report(show_headers)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
