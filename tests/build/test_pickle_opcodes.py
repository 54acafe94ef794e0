"""pickle-format/pickle-opcodes.h against the running CPython's pickletools.

The header is the one home of the pickle opcodes for the C pickler and the
emulator; pickletools.opcodes is CPython's own description of the format.
Every opcode CPython knows is in the header with the same byte value, the
same protocol and the same argument shape (pickletools' ArgumentDescriptor:
n >= 0 fixed bytes, UP_TO_NEWLINE one line -- two for the "_pair" readers
GLOBAL and INST --, TAKEN_FROM_ARGUMENT1/4/4U/8U a 1-, 4- or 8-byte length
prefix), and the header has no opcode CPython does not know.
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
        name, value, proto, enum_value, kind, n = line.split()
        assert int(enum_value) == int(value), name
        assert name not in rows, f"{name} twice"
        rows[name] = (int(value), int(proto), kind, int(n))
    return rows


def pickletools_arg(op):
    """(kind, n) of an opcode's argument, from its ArgumentDescriptor."""
    a = op.arg
    if a is None:
        return ("F", 0)
    if a.n >= 0:
        return ("F", a.n)
    if a.n == pickletools.UP_TO_NEWLINE:
        return ("L", 2 if a.name.endswith("_pair") else 1)
    prefix = {pickletools.TAKEN_FROM_ARGUMENT1: 1, pickletools.TAKEN_FROM_ARGUMENT4: 4,
              pickletools.TAKEN_FROM_ARGUMENT4U: 4, pickletools.TAKEN_FROM_ARGUMENT8U: 8}
    return ("P", prefix[a.n])


def test_every_opcode_as_pickletools_has_it():
    rows = header_rows()
    known = {op.name: (ord(op.code), op.proto) + pickletools_arg(op)
             for op in pickletools.opcodes}
    assert rows == known


def test_values_are_distinct_bytes():
    values = [row[0] for row in header_rows().values()]
    assert len(values) == len(set(values))
    assert all(0 < v < 256 for v in values)
