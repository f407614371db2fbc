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
plus, for a response, "h <name>: <value>" lines before it with --headers;
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

    def report(self, show_headers=False):
        for sid in sorted(self.streams):
            st = self.streams[sid]
            if st["reset"] is not None and not st["done"]:
                print("reset %s %d" % (st["path"], int(st["reset"])))
                continue
            if show_headers:
                for k, v in st["headers"]:
                    print("h %s: %s" % (k, v))
            print("%s %s %d %s" % (st["path"], st["status"], len(st["body"]),
                                   hashlib.md5(st["body"]).hexdigest()))
        if self.goaway is not None:
            print("goaway %d" % int(self.goaway))


def main(argv):
    port = int(argv[1])
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
    elif cmd == "stall":
        p.auto_ack = False
        p.request(args[1])
        # Reads what the window lets through, then nothing more.
        p.pump(timeout=3, until=lambda: False) if False else None
        time.sleep(0)
        try:
            p.pump(timeout=2, until=lambda: len(p.streams[1]["body"]) >= 65535)
        except SystemExit:
            pass
    else:
        raise SystemExit("unknown command " + cmd)
    p.report(show_headers)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
