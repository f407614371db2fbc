#!/usr/bin/env python3
"""A small authoritative DNS server for the resolver's integration tests.

Serves UDP and TCP on one port of 127.0.0.1 (printed as "DNS <port>") and
logs every question it gets as "Q <transport> <name> <type>", so tests can
count queries. Python's standard library only.

Names (any other name: NXDOMAIN):
  a.test        A 127.0.0.1 (TTL 60)
  six.test      AAAA ::1
  both.test     A 127.0.0.1, AAAA ::1
  alias.test    CNAME a.test only (the resolver asks again)
  inline.test   CNAME a.test with a.test's A in the same reply
  loop.test     CNAME loop.test (a chain that never ends)
  fail.test     SERVFAIL
  refused.test  REFUSED
  many.test     A 127.0.0.2, 127.0.0.2, 127.0.0.1 (in that order)
  tc.test       UDP: an empty truncated reply; TCP: A 127.0.0.1
  slow.test     no answer at all
  badid.test    first a reply with a wrong id, then the right one
  ttl0.test     A 127.0.0.1 with TTL 0 (never cached)
  half.test     A: SERVFAIL; AAAA ::1
  zc.test       A: no record; AAAA: CNAME a.test only
  cz.test       A: CNAME a.test only; AAAA: no record, answered 200 ms after
                the A question's answer so that it arrives second
  1.0.0.127.in-addr.arpa  PTR a.test (with the argument "ptr-dname": a
                          DNAME owned by that name instead, no PTR)
"""

import socket
import struct
import sys
import threading

A, CNAME, PTR, AAAA, DNAME = 1, 5, 12, 28, 39
PTR_DNAME = "ptr-dname" in sys.argv[1:]
TYPES = {A: "A", CNAME: "CNAME", PTR: "PTR", AAAA: "AAAA"}


def encode_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def parse_question(data):
    off = 12
    labels = []
    while off < len(data):
        n = data[off]
        off += 1
        if n == 0:
            break
        labels.append(data[off:off + n].decode("latin-1"))
        off += n
    qtype, qclass = struct.unpack("!HH", data[off:off + 4])
    return ".".join(labels).lower(), qtype, data[12:off + 4]


def rr(name, rtype, ttl, rdata):
    return encode_name(name) + struct.pack("!HHIH", rtype, 1, ttl, len(rdata)) + rdata


def answers(name, qtype, transport):
    """(rcode, [records], truncated, drop)"""
    ip4 = socket.inet_pton(socket.AF_INET, "127.0.0.1")
    ip6 = socket.inet_pton(socket.AF_INET6, "::1")
    if name == "slow.test":
        return 0, [], False, True
    if name == "fail.test":
        return 2, [], False, False
    if name == "refused.test":
        return 5, [], False, False
    if name == "half.test":
        if qtype == A:
            return 2, [], False, False
        return 0, [rr(name, AAAA, 60, ip6)], False, False
    if name == "zc.test":
        if qtype == AAAA:
            return 0, [rr(name, CNAME, 60, encode_name("a.test"))], False, False
        return 0, [], False, False
    if name == "many.test":
        if qtype != A:
            return 0, [], False, False
        ip2 = socket.inet_pton(socket.AF_INET, "127.0.0.2")
        return 0, [rr(name, A, 60, ip2), rr(name, A, 60, ip2), rr(name, A, 60, ip4)], False, False
    if name == "cz.test":
        if qtype == A:
            return 0, [rr(name, CNAME, 60, encode_name("a.test"))], False, False
        return 0, [], False, False
    if name == "tc.test":
        if transport == "udp":
            return 0, [], True, False
        return 0, [rr(name, A, 60, ip4)] if qtype == A else [], False, False
    if name in ("a.test", "both.test", "ttl0.test", "badid.test"):
        ttl = 0 if name == "ttl0.test" else 60
        if qtype == A:
            return 0, [rr(name, A, ttl, ip4)], False, False
        if qtype == AAAA and name == "both.test":
            return 0, [rr(name, AAAA, ttl, ip6)], False, False
        return 0, [], False, False
    if name == "six.test":
        return 0, [rr(name, AAAA, 60, ip6)] if qtype == AAAA else [], False, False
    if name == "alias.test":
        return 0, [rr(name, CNAME, 60, encode_name("a.test"))], False, False
    if name == "loop.test":
        return 0, [rr(name, CNAME, 60, encode_name("loop.test"))], False, False
    if name == "inline.test":
        recs = [rr(name, CNAME, 60, encode_name("a.test"))]
        if qtype == A:
            recs.append(rr("a.test", A, 60, ip4))
        return 0, recs, False, False
    if name == "1.0.0.127.in-addr.arpa" and qtype == PTR:
        if PTR_DNAME:
            return 0, [rr(name, DNAME, 60, encode_name("a.test"))], False, False
        return 0, [rr(name, PTR, 60, encode_name("a.test"))], False, False
    return 3, [], False, False


seen_badid = set()
lock = threading.Lock()


def reply(data, transport):
    ident = struct.unpack("!H", data[:2])[0]
    name, qtype, question = parse_question(data)
    with lock:
        print("Q %s %s %s" % (transport, name, TYPES.get(qtype, qtype)), flush=True)
    rcode, recs, truncated, drop = answers(name, qtype, transport)
    if drop:
        return []
    flags = 0x8000 | 0x0400 | 0x0100 | 0x0080 | rcode
    if truncated:
        flags |= 0x0200
    out = []
    if name == "badid.test":
        with lock:
            first = (name, qtype) not in seen_badid
            seen_badid.add((name, qtype))
        if first:
            wrong = struct.pack("!HHHHHH", ident ^ 0x5555, flags, 1, len(recs), 0, 0)
            out.append(wrong + question + b"".join(recs))
    head = struct.pack("!HHHHHH", ident, flags, 1, len(recs), 0, 0)
    out.append(head + question + b"".join(recs))
    return out


def serve_udp(sock):
    while True:
        data, peer = sock.recvfrom(4096)
        try:
            msgs = reply(data, "udp")
            if msgs and parse_question(data)[:2] == ("cz.test", AAAA):
                for msg in msgs:
                    threading.Timer(0.2, sock.sendto, args=(msg, peer)).start()
                continue
            for msg in msgs:
                sock.sendto(msg, peer)
        except Exception as e:  # a malformed query: no answer
            print("ERR %s" % e, flush=True)


def recv_all(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def serve_tcp_conn(conn):
    with conn:
        while True:
            head = recv_all(conn, 2)
            if head is None:
                return
            data = recv_all(conn, struct.unpack("!H", head)[0])
            if data is None:
                return
            for msg in reply(data, "tcp")[-1:]:
                conn.sendall(struct.pack("!H", len(msg)) + msg)


def serve_tcp(sock):
    while True:
        conn, _ = sock.accept()
        threading.Thread(target=serve_tcp_conn, args=(conn,), daemon=True).start()


def main():
    for _ in range(50):
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("127.0.0.1", 0))
        port = udp.getsockname()[1]
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            tcp.bind(("127.0.0.1", port))
        except OSError:
            udp.close()
            tcp.close()
            continue
        tcp.listen(16)
        break
    else:
        sys.exit("no port")
    threading.Thread(target=serve_tcp, args=(tcp,), daemon=True).start()
    print("DNS %d" % port, flush=True)
    serve_udp(udp)


if __name__ == "__main__":
    main()
