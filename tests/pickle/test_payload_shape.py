"""testlib.payload.shape (tests/lib) against pickletools.

The accounting tests read each payload's header and trailer with
testlib.payload.shape, which walks FRAME opcodes instead of decoding every
opcode (pickletools.genops over every payload was most of their time).  It
must say exactly what pickletools.genops says: here on the first graphs of
the differential corpus at every protocol, on payloads with frames
committed mid-dump, with >= 64 KiB payloads outside frames, with a last
frame too short for a header, and on tiny pickles.
"""
import pickle

import pytest

import graphgen
import pt_types as T
from testlib import payload

SPECIAL = [
    ("tiny int", 1),
    ("None", None),
    ("empty list", []),
    ("big bytes", b"x" * 200_000),
    ("big str then small", ["s" * 70_000, 1, (2, 3)]),
    ("many frames", [("a" * 100, i) for i in range(3000)]),
    ("big at the end", [list(range(100)), b"y" * 70_000]),
    ("big bytearray", bytearray(b"z" * 70_000)),
    ("short tail after big", [b"q" * 65_536, 7]),
]


@pytest.fixture(scope="module", autouse=True)
def extension_codes():
    T.add_extensions()
    yield
    T.remove_extensions()


def payloads(protocol):
    for label, obj in SPECIAL:
        yield label, pickle.dumps(obj, protocol)
    for i in range(100):
        seed = protocol * 1_000_000 + i
        try:
            yield "seed %d" % seed, pickle.dumps(graphgen.build(seed, protocol), protocol)
        except Exception:  # noqa: BLE001 - the corpus holds objects pickle refuses
            continue


@pytest.mark.parametrize("protocol", range(6))
def test_shape_is_what_pickletools_reads(protocol):
    framed = 0
    for label, data in payloads(protocol):
        expected = payload.shape_by_genops(data)
        assert payload.shape(data) == expected, (label, protocol)
        assert payload.header_trailer(data) == expected[0] + 1 + (9 if expected[1] else 0)
        framed += expected[1]
    if protocol >= 4:
        assert framed > 0, "no payload with STOP inside a frame: the check saw no frames"
