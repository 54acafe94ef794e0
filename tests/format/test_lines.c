/* Criterion tests of the fast line path (format/lines.c): every line it
 * writes is the line sertrace_fmt_enter / sertrace_fmt_exit writes, for
 * every tag value, depths across the chunk boundaries, names that need
 * escaping, every address and length width, sizes on both sides of each
 * unit, and a type index that names another type in the next dump. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "lines.h"
#include "sertrace/schema.h"

static uint64_t lcg_state = 1;

static uint64_t lcg(void)
{
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return lcg_state >> 11;
}

/* A value of a random bit width (0 .. 64 bits). */
static uint64_t any_width(void)
{
    unsigned bits = (unsigned)(lcg() % 65);
    uint64_t v = lcg() ^ (lcg() << 32);
    return bits == 64 ? v : bits == 0 ? 0 : v & ((1ULL << bits) - 1);
}

#define NTYPES 12

static void check_lines(bool exact, uint64_t seed)
{
    static char long_name[1001];
    const char *names[2][NTYPES];
    sertrace_lines c = SERTRACE_LINES_INIT;
    sertrace_buf want = SERTRACE_BUF_INIT, got = SERTRACE_BUF_INIT;

    memset(long_name, 'y', sizeof long_name - 1);
    long_name[3] = '\x1b';
    for (int i = 0; i < NTYPES; i++)
        names[0][i] = names[1][i] = "mod.Type";
    names[0][1] = "dict";
    names[1][1] = "other.Class"; /* index 1 names another type in dump 2 */
    names[0][2] = "a\\b\tc\x7f\xc2\x85";
    names[0][3] = "caf\xc3\xa9 \xe2\x94\x82 \xf0\x9f\x90\x8d";
    names[1][3] = "bad\xff\xc0\x80\xed\xa0\x80";
    names[0][4] = long_name;
    names[0][5] = NULL;
    names[0][6] = "";
    names[0][7] = "ends.at 0x0";
    names[0][8] = "q'uote";
    names[1][9] = "0123456789abcdef"; /* a head of a whole chunk */
    lcg_state = seed;
    for (int dump = 0; dump < 4; dump++) {
        sertrace_lines_new_dump(&c);
        for (int k = 0; k < 6000; k++) {
            uint8_t tag = k < 256 ? (uint8_t)k : (uint8_t)lcg();
            uint32_t depth = k % 7 == 0 ? (uint32_t)(lcg() % 400) : (uint32_t)(lcg() % 40);
            uint32_t type = (uint32_t)(lcg() % (NTYPES + 1)); /* 0: no index */
            const char *name = type ? names[dump & 1][type - 1] : "uncached";
            size_t len = name ? strlen(name) : 0;
            uint64_t addr = any_width();
            uint64_t length = lcg() % 4 == 0 ? 0 : lcg() % 4 == 0 ? any_width() : lcg() % 20;
            uint64_t bytes = lcg() % 3 == 0 ? any_width() : lcg() % 3000;
            cr_assert_eq(sertrace_fmt_enter(&want, depth, tag, name, len, addr, length), 0);
            cr_assert_eq(sertrace_lines_enter(&c, &got, depth, tag, type, name, len, addr, length),
                         0);
            cr_assert_eq(sertrace_fmt_exit(&want, depth, tag, bytes, exact, NULL), 0);
            cr_assert_eq(sertrace_lines_exit(&got, depth, tag, bytes, exact), 0);
            if (want.len != got.len || memcmp(want.data, got.data, want.len) != 0)
                cr_assert_fail("dump %d line %d (tag %u depth %u type %u):\nwant %s\ngot  %s", dump,
                               k, tag, depth, type, want.data, got.data);
            cr_assert_eq(got.data[got.len], '\0');
            sertrace_buf_clear(&want);
            sertrace_buf_clear(&got);
        }
    }
    sertrace_lines_free(&c);
    sertrace_buf_free(&want);
    sertrace_buf_free(&got);
}

Test(lines, same_as_formatter_human_sizes)
{
    check_lines(false, 12345);
}

Test(lines, same_as_formatter_exact_sizes)
{
    check_lines(true, 777);
}

/* Appending to a buffer that already holds text, with little room left:
 * the earlier text stays, the line is appended whole. */
Test(lines, appends_after_existing_text)
{
    sertrace_lines c = SERTRACE_LINES_INIT;
    sertrace_buf got = SERTRACE_BUF_INIT, want = SERTRACE_BUF_INIT;
    sertrace_lines_new_dump(&c);
    for (size_t pre = 0; pre < 600; pre += 7) {
        for (size_t i = 0; i < pre; i++) {
            sertrace_buf_append(&got, "x", 1);
            sertrace_buf_append(&want, "x", 1);
        }
        cr_assert_eq(sertrace_lines_enter(&c, &got, 3, SERTRACE_TAG_DICT, 1, "dict", 4, 0xabc, 3),
                     0);
        sertrace_fmt_enter(&want, 3, SERTRACE_TAG_DICT, "dict", 4, 0xabc, 3);
        cr_assert_eq(sertrace_lines_exit(&got, 3, SERTRACE_TAG_DICT, 5000, false), 0);
        sertrace_fmt_exit(&want, 3, SERTRACE_TAG_DICT, 5000, false, NULL);
        cr_assert_str_eq(got.data, want.data);
    }
    sertrace_lines_free(&c);
    sertrace_buf_free(&got);
    sertrace_buf_free(&want);
}
