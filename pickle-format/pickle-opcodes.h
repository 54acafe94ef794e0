/* pickle-opcodes.h -- the pickle format's opcodes, as facts: name, byte
 * value, and the protocol that introduced each (pickletools' names).
 *
 * Two parts of sertrace speak pickle and must not include each other's
 * code: the C pickler (serializers/pickle, which writes it) and the
 * emulator (inspect/, which reads it without unpickling).  Both take the
 * opcode values from here.  This header holds data only: one X-macro row
 * per opcode, and the enum built from it; no functions, no types of
 * either side.  Expand PICKLE_OPCODES with your own X to get a name table
 * (#name) or a protocol table.  tests/build/test_pickle_opcodes.py checks
 * every row against the running CPython's pickletools.opcodes.
 */
#ifndef SERTRACE_PICKLE_OPCODES_H
#define SERTRACE_PICKLE_OPCODES_H

/* X(NAME, byte value, protocol that introduced it), by value. */
#define PICKLE_OPCODES(X)                                                                          \
    X(MARK, '(', 0)                                                                                \
    X(EMPTY_TUPLE, ')', 1)                                                                         \
    X(STOP, '.', 0)                                                                                \
    X(POP, '0', 0)                                                                                 \
    X(POP_MARK, '1', 1)                                                                            \
    X(DUP, '2', 0)                                                                                 \
    X(BINBYTES, 'B', 3)                                                                            \
    X(SHORT_BINBYTES, 'C', 3)                                                                      \
    X(FLOAT, 'F', 0)                                                                               \
    X(BINFLOAT, 'G', 1)                                                                            \
    X(INT, 'I', 0)                                                                                 \
    X(BININT, 'J', 1)                                                                              \
    X(BININT1, 'K', 1)                                                                             \
    X(LONG, 'L', 0)                                                                                \
    X(BININT2, 'M', 1)                                                                             \
    X(NONE, 'N', 0)                                                                                \
    X(PERSID, 'P', 0)                                                                              \
    X(BINPERSID, 'Q', 1)                                                                           \
    X(REDUCE, 'R', 0)                                                                              \
    X(STRING, 'S', 0)                                                                              \
    X(BINSTRING, 'T', 1)                                                                           \
    X(SHORT_BINSTRING, 'U', 1)                                                                     \
    X(UNICODE, 'V', 0)                                                                             \
    X(BINUNICODE, 'X', 1)                                                                          \
    X(EMPTY_LIST, ']', 1)                                                                          \
    X(APPEND, 'a', 0)                                                                              \
    X(BUILD, 'b', 0)                                                                               \
    X(GLOBAL, 'c', 0)                                                                              \
    X(DICT, 'd', 0)                                                                                \
    X(APPENDS, 'e', 1)                                                                             \
    X(GET, 'g', 0)                                                                                 \
    X(BINGET, 'h', 1)                                                                              \
    X(INST, 'i', 0)                                                                                \
    X(LONG_BINGET, 'j', 1)                                                                         \
    X(LIST, 'l', 0)                                                                                \
    X(OBJ, 'o', 1)                                                                                 \
    X(PUT, 'p', 0)                                                                                 \
    X(BINPUT, 'q', 1)                                                                              \
    X(LONG_BINPUT, 'r', 1)                                                                         \
    X(SETITEM, 's', 0)                                                                             \
    X(TUPLE, 't', 0)                                                                               \
    X(SETITEMS, 'u', 1)                                                                            \
    X(EMPTY_DICT, '}', 1)                                                                          \
    X(PROTO, 0x80, 2)                                                                              \
    X(NEWOBJ, 0x81, 2)                                                                             \
    X(EXT1, 0x82, 2)                                                                               \
    X(EXT2, 0x83, 2)                                                                               \
    X(EXT4, 0x84, 2)                                                                               \
    X(TUPLE1, 0x85, 2)                                                                             \
    X(TUPLE2, 0x86, 2)                                                                             \
    X(TUPLE3, 0x87, 2)                                                                             \
    X(NEWTRUE, 0x88, 2)                                                                            \
    X(NEWFALSE, 0x89, 2)                                                                           \
    X(LONG1, 0x8a, 2)                                                                              \
    X(LONG4, 0x8b, 2)                                                                              \
    X(SHORT_BINUNICODE, 0x8c, 4)                                                                   \
    X(BINUNICODE8, 0x8d, 4)                                                                        \
    X(BINBYTES8, 0x8e, 4)                                                                          \
    X(EMPTY_SET, 0x8f, 4)                                                                          \
    X(ADDITEMS, 0x90, 4)                                                                           \
    X(FROZENSET, 0x91, 4)                                                                          \
    X(NEWOBJ_EX, 0x92, 4)                                                                          \
    X(STACK_GLOBAL, 0x93, 4)                                                                       \
    X(MEMOIZE, 0x94, 4)                                                                            \
    X(FRAME, 0x95, 4)                                                                              \
    X(BYTEARRAY8, 0x96, 5)                                                                         \
    X(NEXT_BUFFER, 0x97, 5)                                                                        \
    X(READONLY_BUFFER, 0x98, 5)

/* OP_MARK = '(', OP_STOP = '.', ... */
enum pickle_opcode {
#define PICKLE_OPCODE_ENUM_(name, value, proto) OP_##name = value,
    PICKLE_OPCODES(PICKLE_OPCODE_ENUM_)
#undef PICKLE_OPCODE_ENUM_
};

#endif /* SERTRACE_PICKLE_OPCODES_H */
