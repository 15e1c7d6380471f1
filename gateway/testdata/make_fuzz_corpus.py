#!/usr/bin/env python3
"""Regenerates gateway/testdata/fuzz_corpus/: seed inputs for nbd_fuzz (byte 0 = chunk size, then
a client byte stream). Run from anywhere: python3 make_fuzz_corpus.py"""
import os
import struct

OPT_MAGIC = 0x49484156454F5054
REQ_MAGIC = 0x25609513


def opt(code, data=b""):
    return struct.pack(">QII", OPT_MAGIC, code, len(data)) + data


def go(name, infos=()):
    return struct.pack(">I", len(name)) + name + struct.pack(">H", len(infos)) + b"".join(
        struct.pack(">H", i) for i in infos)


def meta(name, queries):
    out = struct.pack(">I", len(name)) + name + struct.pack(">I", len(queries))
    for q in queries:
        out += struct.pack(">I", len(q)) + q
    return out


def req(cmd, offset, length, flags=0, handle=1, payload=b""):
    return struct.pack(">IHHQQI", REQ_MAGIC, flags, cmd, handle, offset, length) + payload


FLAGS = struct.pack(">I", 3)
seeds = {
    "go_structured": bytes([7]) + FLAGS + opt(8) + opt(10, meta(b"disk", [b"base:allocation"]))
    + opt(7, go(b"disk", [3, 1, 2])) + req(1, 0, 512, 1, 1, b"A" * 512) + req(0, 0, 4096, 4, 2)
    + req(7, 0, 65536, 8, 3, b"\x00\x10\x04\x00\x20\x31") + req(6, 4096, 4096, 0x12, 4)
    + req(4, 0, 512, 0, 5) + req(3, 0, 0, 0, 6) + req(5, 0, 512, 0, 7) + req(2, 0, 0),
    "export_name": bytes([3]) + struct.pack(">I", 1) + opt(1, b"disk") + req(0, 0, 512)
    + req(1, 1 << 20, 512, 0, 2, b"B" * 512) + req(9, 0, 0) + req(0, 0, 33 << 20),
    "list_abort": bytes([1]) + FLAGS + opt(3) + opt(9, meta(b"", [])) + opt(6, go(b""))
    + opt(5) + opt(2),
    "malformed": bytes([63]) + FLAGS + opt(7, b"\x00\x00\x00\x09disk\x00\x01")
    + opt(8, b"x") + opt(9, meta(b"ro", [b"base:"])) + opt(3, b"junk")
    + opt(7, go(b"ro")) + req(1, 0, 1, 0, 1, b"x") + req(0, 4095, 2)
    + struct.pack(">IHHQQI", 0x12345678, 0, 0, 0, 0, 0),
}
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz_corpus")
os.makedirs(here, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(here, name), "wb") as f:
        f.write(data)
