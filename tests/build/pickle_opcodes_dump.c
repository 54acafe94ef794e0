/* pickle_opcodes_dump.c -- prints pickle-format/pickle-opcodes.h's table as
 * the compiler sees it, one "NAME VALUE PROTO" line per row, for
 * test_pickle_opcodes.py to compare with CPython's pickletools.  The enum is
 * printed too (OP_NAME's value), so a row and the enum built from it cannot
 * disagree unnoticed.
 */
#include <stdio.h>

#include "pickle-opcodes.h"

int main(void)
{
#define PRINT_ROW_(name, value, proto)                                                             \
    printf("%s %d %d %d\n", #name, (int)(value), (int)(proto), (int)OP_##name);
    PICKLE_OPCODES(PRINT_ROW_)
#undef PRINT_ROW_
    return ferror(stdout) ? 1 : 0;
}
