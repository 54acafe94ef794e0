"""What a pickle payload holds around its root object, read from its bytes.

shape(data) -> (proto_len, stop_framed, frames):
  proto_len    2 when the payload opens with PROTO, else 0;
  stop_framed  whether the final STOP opcode sits inside a FRAME (then that
               frame's 9-byte header is committed after STOP, outside the
               root node: serializers/pickle/pickler.h, output_pos);
  frames       how many FRAME opcodes the payload holds.

The accounting tests need these for every dump of their corpora, and
pickletools.genops over every payload was most of their time (issue 17).
So the payload is walked frame by frame: FRAME (protocol >= 4, PEP 3154)
gives the length of the bytes it announces, and only what lies outside
frames (a payload of >= 64 KiB written on its own, a last frame too short
for a header) is decoded opcode by opcode with pickletools.  Below protocol
4 there are no frames.  shape_by_genops() is the plain pickletools reading,
kept to check this one against (tests/pickle/test_payload_shape.py).
"""

import io
import pickletools

_PROTO = 0x80
_FRAME = 0x95
_STOP = 0x2E  # "."


def shape(data):
    data = bytes(data)
    n = len(data)
    proto_len = 2 if n >= 2 and data[0] == _PROTO else 0
    if proto_len == 0 or data[1] < 4 or n == 0 or data[-1] != _STOP:
        # No frames below protocol 4 (and a payload not ending in STOP is
        # not a whole pickle: let pickletools say what it is).
        return shape_by_genops(data) if proto_len and data[1] >= 4 else (proto_len, False, 0)
    stop = n - 1
    pos, frames, reader = proto_len, 0, None
    while pos < n:
        if data[pos] == _FRAME and pos + 9 <= n:
            length = int.from_bytes(data[pos + 1:pos + 9], "little")
            frames += 1
            body = pos + 9
            if body <= stop < body + length:
                # The frame holding STOP is the last one.
                return proto_len, True, frames
            pos = body + length
            continue
        # One opcode outside any frame.
        if reader is None:
            reader = io.BytesIO(data)
        reader.seek(pos)
        op, _arg, _pos = next(pickletools.genops(reader))
        if op.name == "STOP":
            return proto_len, False, frames
        pos = reader.tell()
    raise ValueError("no STOP opcode outside the frames walked (a truncated pickle?)")


def shape_by_genops(data):
    """The same facts from pickletools.genops over the whole payload."""
    proto_len, frames, stop_pos = 0, [], None
    for op, arg, pos in pickletools.genops(data):
        if op.name == "PROTO" and pos == 0:
            proto_len = 2
        elif op.name == "FRAME":
            frames.append((pos + 9, pos + 9 + arg))
        elif op.name == "STOP":
            stop_pos = pos
    return proto_len, any(a <= stop_pos < b for a, b in frames), len(frames)


def header_trailer(data):
    """Bytes of the payload outside its root node: PROTO, STOP, and the
    header of the frame committed after STOP."""
    proto_len, stop_framed, _ = shape(data)
    return proto_len + 1 + (9 if stop_framed else 0)
