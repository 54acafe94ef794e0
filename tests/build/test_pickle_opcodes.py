"""pickle-format/pickle-opcodes.h against the running CPython's pickletools.

The header is the one home of the pickle opcodes for the C pickler and the
emulator; pickletools.opcodes is CPython's own description of the format.
Every opcode CPython knows is in the header with the same byte value and
the same protocol, and the header has no opcode CPython does not know.
PICKLE_OPCODES_DUMP is the compiled pickle_opcodes_dump.c.
"""
import os
import pickletools
import subprocess


def header_rows():
    out = subprocess.run([os.environ["PICKLE_OPCODES_DUMP"]], check=True,
                         capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        name, value, proto, enum_value = line.split()
        assert int(enum_value) == int(value), name
        assert name not in rows, f"{name} twice"
        rows[name] = (int(value), int(proto))
    return rows


def test_every_opcode_as_pickletools_has_it():
    rows = header_rows()
    known = {op.name: (ord(op.code), op.proto) for op in pickletools.opcodes}
    assert rows == known


def test_values_are_distinct_bytes():
    values = [v for v, _ in header_rows().values()]
    assert len(values) == len(set(values))
    assert all(0 < v < 256 for v in values)
