/* foreign.c -- a program with its own LTTng-UST provider (foreign_tp.h)
 * and nothing of sertrace: `sertrace report` of its trace must say that
 * the trace holds no sertrace event (tests/cli/test_cli.py).  Fires
 * `sertrace_test_foreign:tick` N times (argv[1], default 10) and prints
 * "ticks N". */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "foreign_tp.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 10;

    for (unsigned long i = 0; i < n; i++)
        lttng_ust_tracepoint(sertrace_test_foreign, tick, i);
    printf("ticks %lu\n", n);
    return 0;
}
