/* pickle-opcodes.h -- the pickle format's opcodes, as facts: name, byte
 * value, the protocol that introduced each (pickletools' names) and the
 * shape of its argument in the bytes.
 *
 * Two parts of sertrace speak pickle and must not include each other's
 * code: the C pickler (serializers/pickle, which writes it) and the
 * emulator (inspect/, which reads it without unpickling).  Both take the
 * opcode values from here.  This header holds data only: one X-macro row
 * per opcode, the enum built from it and the argument codes' encoding; no
 * functions, no types of either side.  Expand PICKLE_OPCODES with your own
 * X to get a name table (#name), a protocol table or an argument table.
 * tests/build/test_pickle_opcodes.py checks every row against the running
 * CPython's pickletools.opcodes.
 */
#ifndef SERTRACE_PICKLE_OPCODES_H
#define SERTRACE_PICKLE_OPCODES_H

/* The argument that follows an opcode's byte, as one byte code (never 0,
 * so a table built from the rows has 0 for a byte that is no opcode):
 *   PICKLE_ARG_FIXED(n)   n bytes (0, 1, 2, 4, 8), a little-endian number;
 *   PICKLE_ARG_PREFIX(n)  an n-byte (1, 4, 8) little-endian length, then
 *                         that many bytes;
 *   PICKLE_ARG_LINES(n)   n (1, 2) lines, each ended by '\n'.
 * PICKLE_ARG_KIND(code) is PICKLE_ARG_FIXED(0), PICKLE_ARG_PREFIX(0) or
 * PICKLE_ARG_LINES(0); PICKLE_ARG_N(code) is n. */
#define PICKLE_ARG_FIXED(n) (0x80 | (n))
#define PICKLE_ARG_PREFIX(n) (0x90 | (n))
#define PICKLE_ARG_LINES(n) (0xa0 | (n))
#define PICKLE_ARG_KIND(code) ((code)&0xf0)
#define PICKLE_ARG_N(code) ((code)&0x0f)

/* X(NAME, byte value, protocol that introduced it, argument), by value. */
#define PICKLE_OPCODES(X)                                                                          \
    X(MARK, '(', 0, PICKLE_ARG_FIXED(0))                                                           \
    X(EMPTY_TUPLE, ')', 1, PICKLE_ARG_FIXED(0))                                                    \
    X(STOP, '.', 0, PICKLE_ARG_FIXED(0))                                                           \
    X(POP, '0', 0, PICKLE_ARG_FIXED(0))                                                            \
    X(POP_MARK, '1', 1, PICKLE_ARG_FIXED(0))                                                       \
    X(DUP, '2', 0, PICKLE_ARG_FIXED(0))                                                            \
    X(BINBYTES, 'B', 3, PICKLE_ARG_PREFIX(4))                                                      \
    X(SHORT_BINBYTES, 'C', 3, PICKLE_ARG_PREFIX(1))                                                \
    X(FLOAT, 'F', 0, PICKLE_ARG_LINES(1))                                                          \
    X(BINFLOAT, 'G', 1, PICKLE_ARG_FIXED(8))                                                       \
    X(INT, 'I', 0, PICKLE_ARG_LINES(1))                                                            \
    X(BININT, 'J', 1, PICKLE_ARG_FIXED(4))                                                         \
    X(BININT1, 'K', 1, PICKLE_ARG_FIXED(1))                                                        \
    X(LONG, 'L', 0, PICKLE_ARG_LINES(1))                                                           \
    X(BININT2, 'M', 1, PICKLE_ARG_FIXED(2))                                                        \
    X(NONE, 'N', 0, PICKLE_ARG_FIXED(0))                                                           \
    X(PERSID, 'P', 0, PICKLE_ARG_LINES(1))                                                         \
    X(BINPERSID, 'Q', 1, PICKLE_ARG_FIXED(0))                                                      \
    X(REDUCE, 'R', 0, PICKLE_ARG_FIXED(0))                                                         \
    X(STRING, 'S', 0, PICKLE_ARG_LINES(1))                                                         \
    X(BINSTRING, 'T', 1, PICKLE_ARG_PREFIX(4))                                                     \
    X(SHORT_BINSTRING, 'U', 1, PICKLE_ARG_PREFIX(1))                                               \
    X(UNICODE, 'V', 0, PICKLE_ARG_LINES(1))                                                        \
    X(BINUNICODE, 'X', 1, PICKLE_ARG_PREFIX(4))                                                    \
    X(EMPTY_LIST, ']', 1, PICKLE_ARG_FIXED(0))                                                     \
    X(APPEND, 'a', 0, PICKLE_ARG_FIXED(0))                                                         \
    X(BUILD, 'b', 0, PICKLE_ARG_FIXED(0))                                                          \
    X(GLOBAL, 'c', 0, PICKLE_ARG_LINES(2))                                                         \
    X(DICT, 'd', 0, PICKLE_ARG_FIXED(0))                                                           \
    X(APPENDS, 'e', 1, PICKLE_ARG_FIXED(0))                                                        \
    X(GET, 'g', 0, PICKLE_ARG_LINES(1))                                                            \
    X(BINGET, 'h', 1, PICKLE_ARG_FIXED(1))                                                         \
    X(INST, 'i', 0, PICKLE_ARG_LINES(2))                                                           \
    X(LONG_BINGET, 'j', 1, PICKLE_ARG_FIXED(4))                                                    \
    X(LIST, 'l', 0, PICKLE_ARG_FIXED(0))                                                           \
    X(OBJ, 'o', 1, PICKLE_ARG_FIXED(0))                                                            \
    X(PUT, 'p', 0, PICKLE_ARG_LINES(1))                                                            \
    X(BINPUT, 'q', 1, PICKLE_ARG_FIXED(1))                                                         \
    X(LONG_BINPUT, 'r', 1, PICKLE_ARG_FIXED(4))                                                    \
    X(SETITEM, 's', 0, PICKLE_ARG_FIXED(0))                                                        \
    X(TUPLE, 't', 0, PICKLE_ARG_FIXED(0))                                                          \
    X(SETITEMS, 'u', 1, PICKLE_ARG_FIXED(0))                                                       \
    X(EMPTY_DICT, '}', 1, PICKLE_ARG_FIXED(0))                                                     \
    X(PROTO, 0x80, 2, PICKLE_ARG_FIXED(1))                                                         \
    X(NEWOBJ, 0x81, 2, PICKLE_ARG_FIXED(0))                                                        \
    X(EXT1, 0x82, 2, PICKLE_ARG_FIXED(1))                                                          \
    X(EXT2, 0x83, 2, PICKLE_ARG_FIXED(2))                                                          \
    X(EXT4, 0x84, 2, PICKLE_ARG_FIXED(4))                                                          \
    X(TUPLE1, 0x85, 2, PICKLE_ARG_FIXED(0))                                                        \
    X(TUPLE2, 0x86, 2, PICKLE_ARG_FIXED(0))                                                        \
    X(TUPLE3, 0x87, 2, PICKLE_ARG_FIXED(0))                                                        \
    X(NEWTRUE, 0x88, 2, PICKLE_ARG_FIXED(0))                                                       \
    X(NEWFALSE, 0x89, 2, PICKLE_ARG_FIXED(0))                                                      \
    X(LONG1, 0x8a, 2, PICKLE_ARG_PREFIX(1))                                                        \
    X(LONG4, 0x8b, 2, PICKLE_ARG_PREFIX(4))                                                        \
    X(SHORT_BINUNICODE, 0x8c, 4, PICKLE_ARG_PREFIX(1))                                             \
    X(BINUNICODE8, 0x8d, 4, PICKLE_ARG_PREFIX(8))                                                  \
    X(BINBYTES8, 0x8e, 4, PICKLE_ARG_PREFIX(8))                                                    \
    X(EMPTY_SET, 0x8f, 4, PICKLE_ARG_FIXED(0))                                                     \
    X(ADDITEMS, 0x90, 4, PICKLE_ARG_FIXED(0))                                                      \
    X(FROZENSET, 0x91, 4, PICKLE_ARG_FIXED(0))                                                     \
    X(NEWOBJ_EX, 0x92, 4, PICKLE_ARG_FIXED(0))                                                     \
    X(STACK_GLOBAL, 0x93, 4, PICKLE_ARG_FIXED(0))                                                  \
    X(MEMOIZE, 0x94, 4, PICKLE_ARG_FIXED(0))                                                       \
    X(FRAME, 0x95, 4, PICKLE_ARG_FIXED(8))                                                         \
    X(BYTEARRAY8, 0x96, 5, PICKLE_ARG_PREFIX(8))                                                   \
    X(NEXT_BUFFER, 0x97, 5, PICKLE_ARG_FIXED(0))                                                   \
    X(READONLY_BUFFER, 0x98, 5, PICKLE_ARG_FIXED(0))

/* OP_MARK = '(', OP_STOP = '.', ... */
enum pickle_opcode {
#define PICKLE_OPCODE_ENUM_(name, value, proto, arg) OP_##name = value,
    PICKLE_OPCODES(PICKLE_OPCODE_ENUM_)
#undef PICKLE_OPCODE_ENUM_
};

#endif /* SERTRACE_PICKLE_OPCODES_H */
