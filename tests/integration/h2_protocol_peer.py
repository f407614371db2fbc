#!/usr/bin/python3
"""An HTTP/2 client in raw bytes for the protocol's edge cases: frames sent
in part, or that a conforming client never sends.

    h2_protocol_peer.py PORT CMD ARGS...

    push_promise        a PUSH_PROMISE frame's header alone (no payload):
                        "goaway <code> <last>", then "closed" when the
                        server closes the connection
    block HEX           one HEADERS frame (END_STREAM, END_HEADERS) on
                        stream 1 whose field block is HEX: "status
                        <code>", "rst <sid> <code>" or "goaway <code>
                        <last>"
    big_head N          GET with N fields of 4000 bytes each (no Huffman)
                        in one HEADERS frame: "status <code>"
    reopen FIRST SECOND GET on stream FIRST, read its response, then HEADERS
                        on stream SECOND: "goaway <code> <last>" or
                        "status <code>"
    head_timeout SPLIT  the first SPLIT bytes of a request's HEADERS frame,
                        then wait: "rst <sid> <code>"; then the rest of the
                        frame and a PING: "ping" when it is answered
    frame_size SIZE PATH
                        SETTINGS_MAX_FRAME_SIZE SIZE, windows open, GET
                        PATH: "status <code> largest <n> total <n>" (the
                        longest DATA frame)
    connect [full]      CONNECT with :authority only ("full": with :scheme
                        and :path too): "status <code>" or "rst <sid> <code>"
    fields [--body N] NAME=VALUE...
                        one HEADERS frame on stream 1 with these fields, in
                        order, as literals (any bytes: Python escapes such
                        as \\r or \\x02 are decoded); END_STREAM, or with
                        --body a DATA frame of N bytes that ends the
                        stream: "status <code>" (and the response's
                        x-sent-* fields, "name=value"), "rst <sid> <code>"
                        or "goaway <code> <last>"
    head PATH [MAX_FRAME_SIZE]
                        GET PATH (SETTINGS_MAX_FRAME_SIZE said first when
                        given): "status <code> frames <n> largest <n>
                        block <n> fields <n>" (the response head's HEADERS
                        and CONTINUATION frames, the largest one's length,
                        the block's bytes, the decoded fields' bytes)
Every wait gives up after 30 seconds ("timeout", exit status 1); a
connection closed first prints "closed".
"""

import socket
import struct
import sys

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE = (
    0, 1, 3, 4, 5, 6, 7, 8)
CONTINUATION = 9


def say(line):
    print(line, flush=True)


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", sid) + payload


class Done(Exception):
    pass


class Peer:
    def __init__(self, port, settings=b""):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = b""
        self.sent = []  # the response's x-sent-* fields
        self.dec = hpack.Decoder()
        self.enc = hpack.Encoder()
        self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0, settings) +
                          frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", (1 << 30) - 65535)))

    def next_frame(self):
        while True:
            if len(self.buf) >= 9:
                length = struct.unpack(">I", b"\0" + self.buf[:3])[0]
                if len(self.buf) >= 9 + length:
                    ftype, flags = self.buf[3], self.buf[4]
                    sid = struct.unpack(">I", self.buf[5:9])[0] & 0x7fffffff
                    payload = self.buf[9:9 + length]
                    self.buf = self.buf[9 + length:]
                    if ftype == SETTINGS and not flags & 1:
                        self.sock.sendall(frame(SETTINGS, 1, 0))
                    return ftype, flags, sid, payload
            try:
                got = self.sock.recv(65536)
            except socket.timeout:
                say("timeout")
                sys.exit(1)
            except ConnectionResetError:
                got = b""
            if not got:
                say("closed")
                raise Done()
            self.buf += got

    def block(self, fields):
        return self.enc.encode(fields)

    def request(self, sid, fields, flags=0x5):
        self.sock.sendall(frame(HEADERS, flags, sid, self.block(fields)))

    def until_end(self, sid):
        """The response of stream sid: (status, largest DATA, total)."""
        status, largest, total = None, 0, 0
        while True:
            ftype, flags, fsid, payload = self.next_frame()
            if ftype == GOAWAY:
                code, last = goaway_of(payload)
                say("goaway %d %d" % (code, last))
                raise Done()
            if fsid != sid:
                continue
            if ftype == RST_STREAM:
                say("rst %d %d" % (sid, struct.unpack(">I", payload)[0]))
                raise Done()
            if ftype == HEADERS:
                for name, value in self.dec.decode(payload):
                    if name == ":status":
                        status = value
                    if name.startswith("x-sent-"):
                        self.sent.append("%s=%s" % (name, value))
            if ftype == DATA:
                largest = max(largest, len(payload))
                total += len(payload)
                if payload:
                    self.sock.sendall(frame(WINDOW_UPDATE, 0, sid,
                                            struct.pack(">I", len(payload))))
            if flags & 1:
                return status, largest, total


def literal(name, value):
    """A field as a literal without indexing, new name, no Huffman (RFC 7541
    §6.2.2), whatever bytes it holds."""
    def string(b):
        n = len(b)
        if n < 127:
            return bytes([n]) + b
        out, n = bytearray([127]), n - 127
        while n >= 128:
            out.append((n & 0x7f) | 0x80)
            n >>= 7
        out.append(n)
        return bytes(out) + b
    return b"\0" + string(name) + string(value)


def arg_bytes(text):
    return text.encode("latin-1").decode("unicode_escape").encode("latin-1")


def goaway_of(payload):
    last, code = struct.unpack(">II", payload[:8])
    return code, last & 0x7fffffff


def get_fields(path="/", method="GET"):
    return [(":method", method), (":scheme", "http"), (":path", path),
            (":authority", "localhost")]


def wait_goaway(peer):
    while True:
        ftype, _, _, payload = peer.next_frame()
        if ftype == GOAWAY:
            code, last = goaway_of(payload)
            say("goaway %d %d" % (code, last))
            return


def main(argv):
    port, cmd, args = int(argv[1]), argv[2], argv[3:]
    try:
        if cmd == "push_promise":
            peer = Peer(port)
            # The header says 4 bytes of payload (the promised stream id),
            # which never come.
            peer.sock.sendall(frame(PUSH_PROMISE, 0, 1, b"\0" * 4)[:9])
            wait_goaway(peer)
            while True:
                peer.next_frame()
        elif cmd == "block":
            peer = Peer(port)
            peer.sock.sendall(frame(HEADERS, 0x5, 1, bytes.fromhex(args[0])))
            status, _, _ = peer.until_end(1)
            say("status %s" % status)
        elif cmd == "big_head":
            peer = Peer(port)
            while peer.next_frame()[0] != SETTINGS:
                pass
            fields = get_fields() + [("x-f%d" % i, "x" * 4000) for i in range(int(args[0]))]
            peer.sock.sendall(frame(HEADERS, 0x5, 1, peer.enc.encode(fields, huffman=False)))
            status, _, _ = peer.until_end(1)
            say("status %s" % status)
        elif cmd == "reopen":
            first, second = int(args[0]), int(args[1])
            peer = Peer(port)
            peer.request(first, get_fields())
            peer.until_end(first)
            peer.request(second, get_fields())
            status, _, _ = peer.until_end(second)
            say("status %s" % status)
        elif cmd == "head_timeout":
            split = int(args[0])
            peer = Peer(port)
            # The server's SETTINGS first: its acknowledgement must not go
            # out in the middle of the partial frame.
            while peer.next_frame()[0] != SETTINGS:
                pass
            whole = frame(HEADERS, 0x5, 1, peer.block(get_fields() + [("x-pad", "x" * 40)]))
            peer.sock.sendall(whole[:split])
            while True:
                ftype, _, sid, payload = peer.next_frame()
                if ftype == RST_STREAM:
                    say("rst %d %d" % (sid, struct.unpack(">I", payload)[0]))
                    break
                if ftype == GOAWAY:
                    say("goaway %d %d" % goaway_of(payload))
                    return 0
            peer.sock.sendall(whole[split:] + frame(PING, 0, 0, b"SEE-THIS"))
            while True:
                ftype, flags, _, payload = peer.next_frame()
                if ftype == PING and flags & 1 and payload == b"SEE-THIS":
                    say("ping")
                    break
        elif cmd == "frame_size":
            size, path = int(args[0]), args[1]
            peer = Peer(port, struct.pack(">HI", 0x5, size) + struct.pack(">HI", 0x4, 1 << 20))
            peer.request(1, get_fields(path))
            status, largest, total = peer.until_end(1)
            say("status %s largest %d total %d" % (status, largest, total))
        elif cmd == "connect":
            peer = Peer(port)
            if args and args[0] == "full":
                fields = get_fields("/", "CONNECT")
            else:
                fields = [(":method", "CONNECT"), (":authority", "localhost:80")]
            peer.request(1, fields)
            status, _, _ = peer.until_end(1)
            say("status %s" % status)
        elif cmd == "fields":
            body = None
            if args and args[0] == "--body":
                body, args = int(args[1]), args[2:]
            block = b""
            for a in args:
                name, _, value = a.partition("=")
                block += literal(arg_bytes(name), arg_bytes(value))
            peer = Peer(port)
            peer.sock.sendall(frame(HEADERS, 0x4 if body is not None else 0x5, 1, block))
            if body is not None:
                peer.sock.sendall(frame(DATA, 0x1, 1, b"x" * body))
            status, _, _ = peer.until_end(1)
            say(" ".join(["status %s" % status] + peer.sent))
        elif cmd == "head":
            settings = b""
            if len(args) > 1:
                settings = struct.pack(">HI", 0x5, int(args[1]))
            peer = Peer(port, settings)
            peer.request(1, get_fields(args[0]))
            frames, largest, block = 0, 0, b""
            while True:
                ftype, flags, sid, payload = peer.next_frame()
                if ftype == GOAWAY:
                    say("goaway %d %d" % goaway_of(payload))
                    return 0
                if sid != 1:
                    continue
                if ftype == RST_STREAM:
                    say("rst 1 %d" % struct.unpack(">I", payload)[0])
                    return 0
                if ftype in (HEADERS, CONTINUATION):
                    frames += 1
                    largest = max(largest, len(payload))
                    block += payload
                    if flags & 0x4:
                        break
            peer.dec.max_header_list_size = 1 << 24
            fields = peer.dec.decode(block)
            status = [v for n, v in fields if n == ":status"]
            size = sum(len(n) + len(v) for n, v in fields)
            say("status %s frames %d largest %d block %d fields %d" % (
                status[0] if status else None, frames, largest, len(block), size))
        else:
            say("unknown command " + cmd)
            return 2
    except Done:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
