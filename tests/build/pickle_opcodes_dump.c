/* pickle_opcodes_dump.c -- prints pickle-format/pickle-opcodes.h's table as
 * the compiler sees it, one "NAME VALUE PROTO ENUM KIND N" line per row, for
 * test_pickle_opcodes.py to compare with CPython's pickletools.  The enum is
 * printed too (OP_NAME's value), so a row and the enum built from it cannot
 * disagree unnoticed, and the argument code split into its kind (F fixed,
 * P length prefix, L lines) and its n.
 */
#include <stdio.h>

#include "pickle-opcodes.h"

int main(void)
{
#define PRINT_ROW_(name, value, proto, arg)                                                        \
    printf("%s %d %d %d %c %d\n", #name, (int)(value), (int)(proto), (int)OP_##name,               \
           PICKLE_ARG_KIND(arg) == PICKLE_ARG_FIXED(0)    ? 'F'                                    \
           : PICKLE_ARG_KIND(arg) == PICKLE_ARG_PREFIX(0) ? 'P'                                    \
           : PICKLE_ARG_KIND(arg) == PICKLE_ARG_LINES(0)  ? 'L'                                    \
                                                          : '?',                                    \
           (int)PICKLE_ARG_N(arg));
    PICKLE_OPCODES(PRINT_ROW_)
#undef PRINT_ROW_
    return ferror(stdout) ? 1 : 0;
}
