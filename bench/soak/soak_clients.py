#!/usr/bin/env python3
"""The client side of bench/soak/soak.sh: a mix of well-behaved and hostile
clients against a running vigil, for a given time. Well-behaved clients
(keep-alive, connection per request, pipelining, a stream echo session) count
their failures, each with a timestamp so soak.sh can excuse those cut by a
worker SIGKILL; hostile ones (slow readers, slowloris, resets mid-response)
only have to leave the server healthy.

Writes one JSON line per 10 s to --stats and a final line with the totals."""
import argparse
import json
import socket
import struct
import threading
import time

LOCK = threading.Lock()
COUNTS = {"ok": 0, "failed": 0, "hostile": 0}
FAILURES = []  # [timestamp, client] of failed well-behaved requests
# A pause after each request: a soak is about time, not throughput, and the
# machine is shared (about 2000 requests/s in all).
PACE = 0.002


def count(ok, kind="ok", what=""):
    with LOCK:
        if kind == "hostile":
            COUNTS["hostile"] += 1
        elif ok:
            COUNTS["ok"] += 1
        else:
            COUNTS["failed"] += 1
            FAILURES.append([time.time(), what])


def read_response(sock, buf, with_close=False):
    """One HTTP/1.1 response with Content-Length; returns (status, rest), and
    with_close: (status, rest, whether it said "Connection: close")."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed in the header")
        buf += chunk
    head, _, buf = buf.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    close = False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
        elif name.strip().lower() == b"connection":
            close = value.strip().lower() == b"close"
    while len(buf) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed in the body")
        buf += chunk
    if with_close:
        return status, buf[length:], close
    return status, buf[length:]


def connect(port, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return s


class Retry(Exception):
    """A reused keep-alive connection closed before any byte of the answer:
    the server closed it as idle (graceful shutdown, keepalive_timeout) while
    the request was on its way. Clients retry such an idempotent request on a
    new connection (RFC 9112, 9.3.1); so does this one, without counting it."""


def keepalive(port, stop):
    while not stop.is_set():
        try:
            s = connect(port)
            buf = b""
            for i in range(100):
                if stop.is_set():
                    break
                try:
                    s.sendall(b"GET / HTTP/1.1\r\nHost: soak\r\n\r\n")
                    status, buf = read_response(s, buf)
                except (OSError, ConnectionError) as e:
                    if i > 0 and not buf:
                        raise Retry() from e
                    raise
                count(status == 200, what="keepalive")
                time.sleep(PACE)
            s.close()
        except Retry:
            continue
        except (OSError, ConnectionError, ValueError, IndexError):
            count(False, what="keepalive")
            time.sleep(0.05)


def per_request(port, stop):
    while not stop.is_set():
        try:
            s = connect(port)
            s.sendall(b"GET /index.html HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n")
            status, _ = read_response(s, b"")
            s.close()
            count(status == 200, what="per_request")
            time.sleep(PACE)
        except (OSError, ConnectionError, ValueError, IndexError):
            count(False, what="per_request")
            time.sleep(0.05)


def pipelining(port, stop):
    request = b"GET / HTTP/1.1\r\nHost: soak\r\n\r\n"
    while not stop.is_set():
        try:
            s = connect(port)
            pending = 8
            s.sendall(request * pending)
            buf = b""
            while pending:
                status, buf, close = read_response(s, buf, with_close=True)
                count(status == 200, what="pipelining")
                pending -= 1
                if close and pending:
                    # The server ends the connection after this answer (a
                    # worker stopping gracefully): the requests after it were
                    # not processed, and a client sends them again on a new
                    # connection (RFC 9112 §9.3.2).
                    s.close()
                    s = connect(port)
                    s.sendall(request * pending)
                    buf = b""
            s.close()
            time.sleep(PACE)
        except (OSError, ConnectionError, ValueError, IndexError):
            count(False, what="pipelining")
            time.sleep(0.05)


def slow_reader(port, stop):
    while not stop.is_set():
        try:
            s = connect(port, timeout=30)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n")
            got = 0
            while got < 1 << 20 and not stop.is_set():
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += len(chunk)
                time.sleep(0.01)
            s.close()
        except OSError:
            pass
        count(True, "hostile")


def slowloris(port, stop):
    while not stop.is_set():
        try:
            s = connect(port, timeout=30)
            for ch in b"GET / HTTP/1.1\r\nHost: soak\r\nX-Slow: ":
                if stop.is_set():
                    break
                s.send(bytes([ch]))
                time.sleep(0.5)
            s.close()
        except OSError:
            pass
        count(True, "hostile")


def resetter(port, stop):
    while not stop.is_set():
        try:
            s = connect(port)
            s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: soak\r\n\r\n")
            s.recv(8192)
            # SO_LINGER 0: close() sends an RST in the middle of the response.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        except OSError:
            pass
        count(True, "hostile")
        time.sleep(0.02)


def stream_session(port, stop):
    while not stop.is_set():
        try:
            s = connect(port)
            for i in range(50):
                if stop.is_set():
                    break
                line = b"ping %d\n" % i
                s.sendall(line)
                got = b""
                while len(got) < len(line):
                    chunk = s.recv(4096)
                    if not chunk:
                        raise ConnectionError("stream closed")
                    got += chunk
                count(got == line, what="stream")
                time.sleep(0.01)
            s.close()
        except (OSError, ConnectionError):
            count(False, what="stream")
            time.sleep(0.05)


def echo_backend(port, stop):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(64)
    srv.settimeout(0.5)

    def serve(c):
        try:
            while True:
                data = c.recv(65536)
                if not data:
                    break
                c.sendall(data)
        except OSError:
            pass
        c.close()

    while not stop.is_set():
        try:
            c, _ = srv.accept()
        except socket.timeout:
            continue
        threading.Thread(target=serve, args=(c,), daemon=True).start()
    srv.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", type=int, required=True)
    ap.add_argument("--stream", type=int, default=0)
    ap.add_argument("--echo", type=int, default=0, help="port for the stream backend")
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--stats", required=True)
    a = ap.parse_args()
    stop = threading.Event()
    threads = []
    if a.echo:
        threads.append(threading.Thread(target=echo_backend, args=(a.echo, stop)))
    plan = [(keepalive, 2), (per_request, 2), (pipelining, 1), (slow_reader, 2), (slowloris, 4),
            (resetter, 1)]
    for fn, n in plan:
        for _ in range(n):
            threads.append(threading.Thread(target=fn, args=(a.http, stop)))
    if a.stream:
        threads.append(threading.Thread(target=stream_session, args=(a.stream, stop)))
    for t in threads:
        t.daemon = True
        t.start()
    end = time.time() + a.duration
    with open(a.stats, "w") as out:
        while time.time() < end:
            time.sleep(min(10, max(0, end - time.time())))
            with LOCK:
                out.write(json.dumps({"t": time.time(), **COUNTS}) + "\n")
                out.flush()
        stop.set()
        for t in threads:
            t.join(timeout=35)
        with LOCK:
            out.write(json.dumps({"final": True, **COUNTS, "failures": FAILURES}) + "\n")


if __name__ == "__main__":
    main()
