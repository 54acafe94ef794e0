"""The growth rules of the memo table and of the output buffer
(serializers/pickle/memo.c and output.c, README.md "Speed").

The memo is kept at most half full and grows x4 below 32,768 slots, x2 from
there; the output buffer doubles.  Neither may show in the bytes: around
every size where the memo grows (half of 8, 32, 128 ... 131,072 slots, and
one entry either side) and where the buffer doubles (4 KiB x 2^k, either
side), dumps(), Pickler.dump() into a file and a Pickler reused for a
second dump give pickle's bytes, and the memo holds exactly pickle's
entries (same objects, same indices).
"""
import io
import pickle

import pytest

import sertrace

MEMO_SIZES = [8, 32, 128, 512, 2048, 8192, 32768, 65536, 131072]
# Number of memoized objects just under, at and over each growth point.
MEMO_COUNTS = sorted({n // 2 + d for n in MEMO_SIZES for d in (-1, 0, 1, 2)})
# Payload lengths just under and over each doubling of a 4 KiB buffer.
OUTPUT_LENGTHS = sorted({4096 * 2**k + d for k in range(0, 10) for d in (-40, -1, 0, 1, 40)})


def memo_entries(pickler):
    return sorted((index, id(obj)) for index, obj in pickler.memo.copy().values())


@pytest.mark.parametrize("count", MEMO_COUNTS)
def test_memo_growth_points(count):
    # The list is memoized too: count - 1 distinct tuples plus the list.
    items = [(i,) for i in range(count - 1)]
    payload = items + items[: count // 3]  # references after growth too
    for proto in (2, 4):
        ref = pickle.dumps(payload, proto)
        assert sertrace.dumps(payload, proto) == ref, (count, proto)
        ours, theirs = io.BytesIO(), io.BytesIO()
        p = sertrace.Pickler(ours, proto)
        q = pickle.Pickler(theirs, proto)
        p.dump(payload)
        q.dump(payload)
        assert ours.getvalue() == theirs.getvalue() == ref
        assert len(memo_entries(p)) == count
        assert memo_entries(p) == memo_entries(q)
        # The same pickler again: the memo holds every object, so the second
        # dump is one memo reference.
        p.dump(payload)
        q.dump(payload)
        assert ours.getvalue() == theirs.getvalue()


@pytest.mark.parametrize("proto", [0, 2, 3, 4, 5])
def test_output_growth_points(proto):
    for n in OUTPUT_LENGTHS:
        # Many small writes, so the buffer grows through every size below n.
        payload = [b"ab" * 3] * (n // 10) + [b"z" * (n % 10)]
        ref = pickle.dumps(payload, proto)
        assert sertrace.dumps(payload, proto) == ref, (proto, n)
        out = io.BytesIO()
        sertrace.Pickler(out, proto).dump(payload)
        assert out.getvalue() == ref, (proto, n)
        # One payload that needs a buffer doubled several times at once.
        big = b"q" * n
        assert sertrace.dumps(["x", big], proto) == pickle.dumps(["x", big], proto), (proto, n)
