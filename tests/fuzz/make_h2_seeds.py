#!/usr/bin/python3
"""Writes the seed corpus of h2_session_fuzz (tests/fuzz/corpus/h2_session_fuzz/):
a client's frames after the preface and SETTINGS (first byte 0) or the whole
input with the preface (first byte 1). Needs Debian's python3-h2 (hyperframe
and hpack). Run from anywhere; it replaces the files it names."""

import os

import hpack
from hyperframe.frame import (ContinuationFrame, DataFrame, GoAwayFrame, HeadersFrame,
                              PingFrame, PriorityFrame, RstStreamFrame, SettingsFrame,
                              WindowUpdateFrame, ExtensionFrame)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "h2_session_fuzz")
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def head(path, method="GET", extra=()):
    return [(":method", method), (":path", path), (":scheme", "http"),
            (":authority", "localhost")] + list(extra)


def frames(*fs):
    return b"".join(f.serialize() for f in fs)


def seeds():
    enc = None
    block = lambda *a, **k: enc.encode(head(*a, **k))  # noqa: E731
    enc = hpack.Encoder()  # each seed is a connection of its own
    yield "get", frames(HeadersFrame(1, data=block("/"), flags=["END_HEADERS", "END_STREAM"]))
    enc = hpack.Encoder()  # each seed is a connection of its own
    yield "get_return", frames(HeadersFrame(1, data=block("/r"),
                                            flags=["END_HEADERS", "END_STREAM"]))
    enc = hpack.Encoder()  # each seed is a connection of its own
    yield "big_window", frames(
        SettingsFrame(0, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 1 << 20}),
        WindowUpdateFrame(0, window_increment=1 << 20),
        HeadersFrame(1, data=block("/big.bin"), flags=["END_HEADERS", "END_STREAM"]))
    enc = hpack.Encoder()  # each seed is a connection of its own
    yield "big_small_window", frames(
        SettingsFrame(0, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 100,
                                   SettingsFrame.MAX_FRAME_SIZE: 16384}),
        HeadersFrame(1, data=block("/big.bin"), flags=["END_HEADERS", "END_STREAM"]),
        WindowUpdateFrame(1, window_increment=5000))
    enc = hpack.Encoder()  # each seed is a connection of its own
    yield "post", frames(
        HeadersFrame(1, data=block("/post", "POST", [("content-length", "10")]),
                     flags=["END_HEADERS"]),
        DataFrame(1, data=b"01234"), DataFrame(1, data=b"56789", flags=["END_STREAM"]))
    enc = hpack.Encoder()  # each seed is a connection of its own
    yield "post_no_length", frames(
        HeadersFrame(1, data=block("/post", "POST"), flags=["END_HEADERS"]),
        DataFrame(1, data=b"x" * 5000), DataFrame(1, data=b"", flags=["END_STREAM"]))
    enc = hpack.Encoder()  # each seed is a connection of its own
    yield "proxy_body", frames(
        HeadersFrame(1, data=block("/proxy", "POST", [("content-length", "3500")]),
                     flags=["END_HEADERS"]),
        DataFrame(1, data=b"p" * 1500), DataFrame(1, data=b"q" * 2000, flags=["END_STREAM"]))
    enc = hpack.Encoder()  # each seed is a connection of its own
    yield "proxy_unknown_length", frames(
        HeadersFrame(1, data=block("/proxy", "PUT", [("expect", "100-continue")]),
                     flags=["END_HEADERS"]),
        DataFrame(1, data=b"x" * 100), RstStreamFrame(1, error_code=8),
        HeadersFrame(3, data=block("/proxy", "POST"), flags=["END_HEADERS"]),
        DataFrame(3, data=b"y" * 3000, flags=["END_STREAM"]))
    enc = hpack.Encoder()  # each seed is a connection of its own
    yield "post_trailers", frames(
        HeadersFrame(1, data=block("/post", "POST"), flags=["END_HEADERS"]),
        DataFrame(1, data=b"abc"),
        HeadersFrame(1, data=enc.encode([("x-trailer", "1")]),
                     flags=["END_HEADERS", "END_STREAM"]))
    enc = hpack.Encoder()  # each seed is a connection of its own
    yield "streams_reset", frames(
        *[f for sid in range(1, 40, 2) for f in (
            HeadersFrame(sid, data=block("/big.bin"), flags=["END_HEADERS", "END_STREAM"]),
            RstStreamFrame(sid, error_code=8))])
    enc = hpack.Encoder()  # each seed is a connection of its own
    yield "many_streams", frames(
        *[HeadersFrame(sid, data=block("/" if sid % 4 == 1 else "/r"),
                       flags=["END_HEADERS", "END_STREAM"]) for sid in range(1, 60, 2)])
    enc = hpack.Encoder()  # each seed is a connection of its own
    yield "continuation", frames(
        HeadersFrame(1, data=block("/")[:5], flags=["END_STREAM"]),
        ContinuationFrame(1, data=block("/")[5:], flags=["END_HEADERS"]))
    enc = hpack.Encoder()  # each seed is a connection of its own
    yield "control", frames(
        PingFrame(0, opaque_data=b"12345678"),
        PriorityFrame(3, depends_on=1, stream_weight=200),
        SettingsFrame(0, settings={SettingsFrame.HEADER_TABLE_SIZE: 0,
                                   SettingsFrame.ENABLE_PUSH: 0}),
        HeadersFrame(1, data=block("/", extra=[("priority", "u=0, i")]),
                     flags=["END_HEADERS", "END_STREAM"]),
        GoAwayFrame(0, last_stream_id=0, error_code=0))
    # PRIORITY_UPDATE (RFC 9218, type 0x10): the prioritized stream 1, "u=7".
    enc = hpack.Encoder()  # each seed is a connection of its own
    yield "priority_update", frames(
        HeadersFrame(1, data=block("/big.bin"), flags=["END_HEADERS", "END_STREAM"]),
        ExtensionFrame(type=0x10, stream_id=0, body=b"\x00\x00\x00\x01u=7"),
        HeadersFrame(3, data=block("/", extra=[("priority", "u=1")]),
                     flags=["END_HEADERS", "END_STREAM"]))
    enc = hpack.Encoder()  # each seed is a connection of its own
    yield "cookies_host", frames(HeadersFrame(1, data=enc.encode(
        [(":method", "GET"), (":path", "/index.html?a=b"), (":scheme", "http"),
         ("host", "localhost"), ("cookie", "a=1"), ("cookie", "b=2"),
         ("accept-encoding", "gzip")]), flags=["END_HEADERS", "END_STREAM"]))
    enc = hpack.Encoder()  # each seed is a connection of its own
    yield "bad_pseudo", frames(HeadersFrame(1, data=enc.encode(
        [(":method", "GET"), (":path", "/"), (":scheme", "http"), (":authority", "localhost"),
         (":status", "200"), ("connection", "close")]), flags=["END_HEADERS", "END_STREAM"]))


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(b"\x00" + data)
    with open(os.path.join(OUT, "raw_preface"), "wb") as f:
        f.write(b"\x01" + PREFACE + frames(SettingsFrame(0)) + frames(HeadersFrame(
            1, data=hpack.Encoder().encode(head("/")), flags=["END_HEADERS", "END_STREAM"])))
    with open(os.path.join(OUT, "raw_http1"), "wb") as f:
        f.write(b"\x01GET / HTTP/1.1\r\nHost: x\r\n\r\n")


if __name__ == "__main__":
    main()
