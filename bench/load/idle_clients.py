#!/usr/bin/env python3
"""Opens N keep-alive connections to an HTTP server, sends one request on each
and reads its response, then keeps them all open and idle until stdin closes.

    idle_clients.py PORT N [PATH]

Prints "ready N" once every connection has had its response, so a caller can
measure the server's memory with N idle keep-alive connections. Used by
bench/load/http_vs_nginx.sh.
"""
import socket
import sys


def read_response(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the header")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed in the body")
        body += chunk


def main():
    port = int(sys.argv[1])
    n = int(sys.argv[2])
    path = sys.argv[3] if len(sys.argv) > 3 else "/small.txt"
    request = ("GET %s HTTP/1.1\r\nHost: bench\r\n\r\n" % path).encode()
    socks = []
    # In batches: connect and send a batch, then read its responses.
    batch = 500
    for start in range(0, n, batch):
        group = []
        for _ in range(min(batch, n - start)):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(request)
            group.append(s)
        for s in group:
            read_response(s)
        socks.extend(group)
    print("ready %d" % len(socks), flush=True)
    sys.stdin.read()  # until the caller closes our stdin
    for s in socks:
        s.close()


if __name__ == "__main__":
    main()
