#!/usr/bin/env python3
"""Opens N HTTP/2 connections in clear (prior knowledge) to a server, on each
the preface, SETTINGS, the acknowledgement of the server's SETTINGS and one
GET of PATH whose response it reads; then keeps them all open and idle until
stdin closes.

    idle_h2_clients.py PORT N [PATH]      (IDLE_PATH in the environment wins)

With IDLE_TLS=1 in the environment, over TLS (ALPN h2, the certificate not
verified) instead of in clear.

Prints "ready N" once every connection has had its response. Used by
bench/load/h2_idle_memory.sh.
"""
import os
import resource
import socket
import ssl
import sys


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# SETTINGS_INITIAL_WINDOW_SIZE 1 MiB, and a connection WINDOW_UPDATE of
# 16 MiB: a response of up to 1 MiB needs no WINDOW_UPDATE from us.
SETTINGS = (b"\x00\x00\x06\x04\x00\x00\x00\x00\x00" + b"\x00\x04" + (1 << 20).to_bytes(4, "big") +
            b"\x00\x00\x04\x08\x00\x00\x00\x00\x00" + (1 << 24).to_bytes(4, "big"))
SETTINGS_ACK = b"\x00\x00\x00\x04\x01\x00\x00\x00\x00"


def request(path):
    # HPACK (RFC 7541) by hand: :method GET and :scheme http from the static
    # table (indices 2 and 6), :path and :authority as literals without
    # indexing whose names are static entries 4 and 1 (no Huffman coding).
    p = path.encode()
    block = b"\x82\x86\x04" + bytes([len(p)]) + p + b"\x01\x05bench"
    # HEADERS, END_STREAM | END_HEADERS, stream 1
    return len(block).to_bytes(3, "big") + b"\x01\x05\x00\x00\x00\x01" + block


def wait_end_of_stream(sock):
    """Reads frames until one of stream 1 has END_STREAM."""
    data = b""
    while True:
        while len(data) >= 9:
            length = int.from_bytes(data[:3], "big")
            if len(data) < 9 + length:
                break
            ftype, flags = data[3], data[4]
            sid = int.from_bytes(data[5:9], "big") & 0x7FFFFFFF
            data = data[9 + length:]
            if sid == 1 and ftype in (0, 1) and flags & 1:
                return
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the response ended")
        data += chunk


def main():
    port = int(sys.argv[1])
    n = int(sys.argv[2])
    # IDLE_PATH (the caller's environment) wins: common.sh's helper names /small.txt.
    path = os.environ.get("IDLE_PATH") or (sys.argv[3] if len(sys.argv) > 3 else "/small.txt")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    hello = PREFACE + SETTINGS + SETTINGS_ACK + request(path)
    ctx = None
    if os.environ.get("IDLE_TLS") == "1":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2"])
    socks = []
    batch = 500
    for start in range(0, n, batch):
        group = []
        for _ in range(min(batch, n - start)):
            s = socket.create_connection(("127.0.0.1", port))
            if ctx is not None:
                s = ctx.wrap_socket(s, server_hostname="localhost")
            s.sendall(hello)
            group.append(s)
        for s in group:
            wait_end_of_stream(s)
        socks += group
    print("ready %d" % len(socks), flush=True)
    sys.stdin.read()
    for s in socks:
        s.close()


if __name__ == "__main__":
    main()
