#!/usr/bin/python3
"""pprof_decode.py - reads a pprof profile (a gzipped perftools.profiles.Profile,
profile.proto) with a protocol-buffers wire-format reader of its own, for the
export tests (test_exports.sh): memlens' encoder (report/pprof.c) is checked
by a decoder that shares no code with it.

    pprof_decode.py FILE.pb.gz        prints the decoded profile as JSON

decode(data) returns the profile as plain dicts and lists, every field
present (absent fields read as proto3 defaults: 0, "", false, []). The
reader is strict where a lax one would hide an encoder bug: a truncated
varint or field, a message that ends inside a field, a wire type that does
not fit the field, and field numbers profile.proto does not define (as of
the fields memlens writes and the ones around them) raise DecodeError.
"""
import gzip
import json
import sys


class DecodeError(Exception):
    pass


# Wire types.
VARINT, I64, LEN, I32 = 0, 1, 2, 5

# profile.proto, field by field: number -> (name, kind, repeated).
# Kinds: "uint64", "int64", "bool", "string", or a message name.
SCHEMA = {
    "Profile": {
        1: ("sample_type", "ValueType", True),
        2: ("sample", "Sample", True),
        3: ("mapping", "Mapping", True),
        4: ("location", "Location", True),
        5: ("function", "Function", True),
        6: ("string_table", "string", True),
        7: ("drop_frames", "int64", False),
        8: ("keep_frames", "int64", False),
        9: ("time_nanos", "int64", False),
        10: ("duration_nanos", "int64", False),
        11: ("period_type", "ValueType", False),
        12: ("period", "int64", False),
        13: ("comment", "int64", True),
        14: ("default_sample_type", "int64", False),
    },
    "ValueType": {1: ("type", "int64", False), 2: ("unit", "int64", False)},
    "Sample": {
        1: ("location_id", "uint64", True),
        2: ("value", "int64", True),
        3: ("label", "Label", True),
    },
    "Label": {
        1: ("key", "int64", False),
        2: ("str", "int64", False),
        3: ("num", "int64", False),
        4: ("num_unit", "int64", False),
    },
    "Mapping": {
        1: ("id", "uint64", False),
        2: ("memory_start", "uint64", False),
        3: ("memory_limit", "uint64", False),
        4: ("file_offset", "uint64", False),
        5: ("filename", "int64", False),
        6: ("build_id", "int64", False),
        7: ("has_functions", "bool", False),
        8: ("has_filenames", "bool", False),
        9: ("has_line_numbers", "bool", False),
        10: ("has_inline_frames", "bool", False),
    },
    "Location": {
        1: ("id", "uint64", False),
        2: ("mapping_id", "uint64", False),
        3: ("address", "uint64", False),
        4: ("line", "Line", True),
        5: ("is_folded", "bool", False),
    },
    "Line": {1: ("function_id", "uint64", False), 2: ("line", "int64", False)},
    "Function": {
        1: ("id", "uint64", False),
        2: ("name", "int64", False),
        3: ("system_name", "int64", False),
        4: ("filename", "int64", False),
        5: ("start_line", "int64", False),
    },
}

SCALARS = ("uint64", "int64", "bool", "string")


def read_varint(buf, pos, end):
    """Returns (value, new position); at most ten bytes, as protobuf allows."""
    value = 0
    for i in range(10):
        if pos >= end:
            raise DecodeError("varint runs past the end of its message at byte %d" % pos)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            if value >= 1 << 64:
                raise DecodeError("varint over 64 bits at byte %d" % pos)
            return value, pos
    raise DecodeError("varint longer than ten bytes at byte %d" % pos)


def scalar(kind, v):
    if kind == "int64" and v >= 1 << 63:
        return v - (1 << 64)
    if kind == "bool":
        if v not in (0, 1):
            raise DecodeError("bool field holds %d" % v)
        return bool(v)
    return v


def default(kind, repeated):
    if repeated:
        return []
    if kind == "string":
        return ""
    if kind == "bool":
        return False
    if kind in SCALARS:
        return 0
    return None


def decode_message(name, buf, pos, end):
    schema = SCHEMA[name]
    out = {fname: default(kind, rep) for fname, kind, rep in schema.values()}
    while pos < end:
        key, pos = read_varint(buf, pos, end)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise DecodeError("%s: field number 0 at byte %d" % (name, pos))
        if field not in schema:
            raise DecodeError("%s: field %d is not in profile.proto" % (name, field))
        fname, kind, rep = schema[field]
        if wire == VARINT:
            if kind not in ("uint64", "int64", "bool"):
                raise DecodeError("%s.%s: a varint where %s belongs" % (name, fname, kind))
            v, pos = read_varint(buf, pos, end)
            v = scalar(kind, v)
            if rep:
                out[fname].append(v)
            else:
                out[fname] = v
        elif wire == LEN:
            n, pos = read_varint(buf, pos, end)
            if pos + n > end:
                raise DecodeError("%s.%s: %d bytes run past the end of the message" % (name, fname, n))
            if kind == "string":
                try:
                    v = bytes(buf[pos:pos + n]).decode("utf-8")
                except UnicodeDecodeError as e:
                    raise DecodeError("%s.%s: not UTF-8: %s" % (name, fname, e))
            elif kind in SCALARS:
                # A packed repeated scalar field.
                if not rep:
                    raise DecodeError("%s.%s: packed bytes for a single value" % (name, fname))
                p, vals = pos, []
                while p < pos + n:
                    v, p = read_varint(buf, p, pos + n)
                    vals.append(scalar(kind, v))
                out[fname].extend(vals)
                pos += n
                continue
            else:
                v = decode_message(kind, buf, pos, pos + n)
            pos += n
            if rep:
                out[fname].append(v)
            else:
                out[fname] = v
        elif wire in (I64, I32):
            raise DecodeError("%s.%s: fixed-width wire type %d, profile.proto has none" % (name, fname, wire))
        else:
            raise DecodeError("%s: wire type %d (groups or garbage) at byte %d" % (name, wire, pos))
    if pos != end:
        raise DecodeError("%s: ends at byte %d, inside a field (message end %d)" % (name, pos, end))
    for fname, kind, rep in schema.values():
        if not rep and out[fname] is None and kind not in SCALARS:
            out[fname] = {f: default(k, r) for f, k, r in SCHEMA[kind].values()}
    return out


def decode(data):
    """A profile from the bytes of a .pb.gz file (or of a bare message)."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return decode_message("Profile", memoryview(data), 0, len(data))


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], "rb") as f:
        prof = decode(f.read())
    json.dump(prof, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
