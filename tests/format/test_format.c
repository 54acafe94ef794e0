/* tests/format/test_format.c -- golden outputs of the tree-line formatter.
 *
 * Every line shape of format.h (enter at depth 1..n, exit with sizes and
 * flags, notes, flag lines), the repr of each tag class, human and exact
 * sizes from 0 B to UINT64_MAX, escaping of control characters and of every
 * kind of invalid UTF-8 (stray continuation bytes, truncated sequences,
 * overlong forms, surrogates, code points above U+10FFFF), JSON strings,
 * size parsing (good and bad inputs), and a 10000-deep tree.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "sertrace/schema.h"

static sertrace_buf b;

static void setup(void)
{
    b = (sertrace_buf)SERTRACE_BUF_INIT;
}

static void teardown(void)
{
    sertrace_buf_free(&b);
}

TestSuite(format, .init = setup, .fini = teardown);

static const char *size_text(uint64_t bytes, bool exact)
{
    sertrace_buf_clear(&b);
    cr_assert_eq(sertrace_fmt_size(&b, bytes, exact), 0);
    return b.data;
}

Test(format, sizes_human)
{
    static const struct {
        uint64_t bytes;
        const char *text;
    } cases[] = {
        {0, "0 B"},
        {1, "1 B"},
        {1023, "1023 B"},
        {1024, "1.0 KiB"},
        {1536, "1.5 KiB"},
        {2047, "1.9 KiB"},
        {3000, "2.9 KiB"},
        {(1u << 20) - 1, "1023.9 KiB"},
        {1u << 20, "1.0 MiB"},
        {(uint64_t)1 << 30, "1.0 GiB"},
        {((uint64_t)1 << 32) + 5, "4.0 GiB"},
        {(uint64_t)5 << 40, "5.0 TiB"},
        {(uint64_t)1 << 50, "1.0 PiB"},
        {(uint64_t)1 << 60, "1.0 EiB"},
        {UINT64_MAX, "15.9 EiB"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_expect_str_eq(size_text(cases[i].bytes, false), cases[i].text, "bytes=%llu",
                         (unsigned long long)cases[i].bytes);
}

Test(format, sizes_exact)
{
    cr_expect_str_eq(size_text(0, true), "0 B");
    cr_expect_str_eq(size_text(1024, true), "1024 B");
    cr_expect_str_eq(size_text(((uint64_t)1 << 32) + 5, true), "4294967301 B");
    cr_expect_str_eq(size_text(UINT64_MAX, true), "18446744073709551615 B");
}

Test(format, tags)
{
    char tmp[8];
    cr_expect_str_eq(sertrace_tag_text(SERTRACE_TAG_DICT, tmp), "D2");
    cr_expect_str_eq(sertrace_tag_text(SERTRACE_TAG_CLASS, tmp), "T4");
    cr_expect_str_eq(sertrace_tag_text(SERTRACE_TAG_MEMO, tmp), "Mo");
    cr_expect_str_eq(sertrace_tag_text(200, tmp), "K200");
    cr_expect_str_eq(sertrace_tag_text(255, tmp), "K255");
    cr_expect_str_eq(sertrace_tag_text(250, tmp), "K250");
    cr_expect_eq(sertrace_tag_from_text("D2"), SERTRACE_TAG_DICT);
    cr_expect_eq(sertrace_tag_from_text("Ce2"), SERTRACE_TAG_DILL_CE2);
    cr_expect_eq(sertrace_tag_from_text("K200"), 200);
    cr_expect_eq(sertrace_tag_from_text("K1"), -1); /* 1 has a text: D2 */
    cr_expect_eq(sertrace_tag_from_text("K07"), -1);
    cr_expect_eq(sertrace_tag_from_text("nope"), -1);
    cr_expect_eq(sertrace_tag_from_text(NULL), -1);
    /* Every table entry round-trips. */
    for (int v = 0; v < 256; v++)
        cr_expect_eq(sertrace_tag_from_text(sertrace_tag_text((uint8_t)v, tmp)), v, "tag %d", v);
}

static const char *repr(uint8_t tag, const char *name, uint64_t addr, uint64_t length)
{
    sertrace_buf_clear(&b);
    cr_assert_eq(sertrace_fmt_repr(&b, tag, name, name ? strlen(name) : 0, addr, length), 0);
    return b.data;
}

Test(format, repr_per_tag_class)
{
    cr_expect_str_eq(repr(SERTRACE_TAG_CLASS, "dispatch.scheduler.State", 0x10, 0),
                     "<class 'dispatch.scheduler.State'>");
    cr_expect_str_eq(repr(SERTRACE_TAG_DILL_T1, "type", 0x10, 0), "<class 'type'>");
    cr_expect_str_eq(repr(SERTRACE_TAG_DILL_T2, "__main__.Account", 0x10, 0),
                     "<class '__main__.Account'>");
    cr_expect_str_eq(repr(SERTRACE_TAG_FUNCTION, "_create_type", 0x7f343677a7a0, 0),
                     "<function _create_type at 0x7f343677a7a0>");
    cr_expect_str_eq(repr(SERTRACE_TAG_DILL_F1, "make_counter.<locals>.incr", 0xabc, 0),
                     "<function make_counter.<locals>.incr at 0xabc>");
    cr_expect_str_eq(repr(SERTRACE_TAG_MEMO, "dict", 0x1000, 0), "<ref dict object at 0x1000>");
    /* a memo hit on a class or function refers to it (serializers/objdesc) */
    cr_expect_str_eq(repr(SERTRACE_TAG_MEMO, "class app.User", 0x1000, 0),
                     "<ref class 'app.User'>");
    cr_expect_str_eq(repr(SERTRACE_TAG_MEMO, "function app.main", 0x2000, 0),
                     "<ref function app.main at 0x2000>");
    cr_expect_str_eq(repr(SERTRACE_TAG_MEMO, "classy.Thing", 0x30, 0),
                     "<ref classy.Thing object at 0x30>");
    cr_expect_str_eq(repr(SERTRACE_TAG_INSTANCE, "class app.User", 0x30, 0),
                     "<class app.User object at 0x30>");
    cr_expect_str_eq(repr(SERTRACE_TAG_DICT, "dict", 0x7710bc313000, 0),
                     "<dict object at 0x7710bc313000>");
    cr_expect_str_eq(repr(SERTRACE_TAG_LIST, "list", 0x20, 4), "<list object at 0x20> len=3");
    cr_expect_str_eq(repr(SERTRACE_TAG_STR, "str", 0, 1), "<str object at 0x0> len=0");
    cr_expect_str_eq(repr(SERTRACE_TAG_INSTANCE, NULL, 0x30, 0), "<? object at 0x30>");
    cr_expect_str_eq(repr(250, "x", 0xffffffffffffffff, UINT64_MAX),
                     "<x object at 0xffffffffffffffff> len=18446744073709551614");
}

Test(format, golden_tree)
{
    static const char golden[] = "┬ D2: <dict object at 0x7710bc313000> len=2\n"
                                 "├┬ T4: <class 'dispatch.scheduler.State'>\n"
                                 "│└ # T4 [31 B]\n"
                                 "├┬ D2: <dict object at 0x7710bc313a40> len=1\n"
                                 "││ @ frame = ip=42 sp=3\n"
                                 "│├┬ L: <list object at 0x10> len=0\n"
                                 "││└ # L [2 B]\n"
                                 "││ !! UNSERIALIZABLE F1 'incr' at State.x: no\n"
                                 "│└ # D2 [1.0 MiB]  !! OVERSIZED (>= 1.0 MiB)\n"
                                 "└ # D2 [2.9 KiB]\n";
    const char *state = "dispatch.scheduler.State";
    const char *note = "ip=42 sp=3";
    const char *flag = "UNSERIALIZABLE F1 'incr' at State.x: no";

    cr_assert_eq(sertrace_fmt_enter(&b, 1, SERTRACE_TAG_DICT, "dict", 4, 0x7710bc313000, 3), 0);
    cr_assert_eq(sertrace_fmt_enter(&b, 2, SERTRACE_TAG_CLASS, state, strlen(state), 0x1, 0), 0);
    cr_assert_eq(sertrace_fmt_exit(&b, 2, SERTRACE_TAG_CLASS, 31, false, NULL), 0);
    cr_assert_eq(sertrace_fmt_enter(&b, 2, SERTRACE_TAG_DICT, "dict", 4, 0x7710bc313a40, 2), 0);
    cr_assert_eq(sertrace_fmt_note(&b, 2, "frame", 5, note, strlen(note)), 0);
    cr_assert_eq(sertrace_fmt_enter(&b, 3, SERTRACE_TAG_LIST, "list", 4, 0x10, 1), 0);
    cr_assert_eq(sertrace_fmt_exit(&b, 3, SERTRACE_TAG_LIST, 2, false, ""), 0);
    cr_assert_eq(sertrace_fmt_flag_line(&b, 2, flag, strlen(flag)), 0);
    cr_assert_eq(
        sertrace_fmt_exit(&b, 2, SERTRACE_TAG_DICT, 1 << 20, false, "!! OVERSIZED (>= 1.0 MiB)"),
        0);
    cr_assert_eq(sertrace_fmt_exit(&b, 1, SERTRACE_TAG_DICT, 3000, false, NULL), 0);
    cr_expect_str_eq(b.data, golden);
    cr_expect_eq(b.len, strlen(golden));
}

Test(format, depth_1_to_n_prefixes)
{
    /* Depth d entry: "│"*(d-2) + "├┬ "; exit: "│"*(d-1) + "└ # ". */
    for (uint32_t d = 1; d <= 6; d++) {
        char want[256] = "";
        sertrace_buf_clear(&b);
        cr_assert_eq(sertrace_fmt_enter(&b, d, SERTRACE_TAG_TUPLE, "tuple", 5, 0xa, 0), 0);
        if (d == 1) {
            strcat(want, "┬ ");
        } else {
            for (uint32_t i = 0; i < d - 2; i++)
                strcat(want, "│");
            strcat(want, "├┬ ");
        }
        strcat(want, "Tu: <tuple object at 0xa>\n");
        cr_expect_str_eq(b.data, want, "enter depth %u", d);

        sertrace_buf_clear(&b);
        cr_assert_eq(sertrace_fmt_exit(&b, d, SERTRACE_TAG_TUPLE, 7, true, NULL), 0);
        want[0] = '\0';
        for (uint32_t i = 0; i + 1 < d; i++)
            strcat(want, "│");
        strcat(want, "└ # Tu [7 B]\n");
        cr_expect_str_eq(b.data, want, "exit depth %u", d);

        sertrace_buf_clear(&b);
        cr_assert_eq(sertrace_fmt_note(&b, d, "k", 1, "v", 1), 0);
        want[0] = '\0';
        for (uint32_t i = 0; i < d; i++)
            strcat(want, "│");
        strcat(want, " @ k = v\n");
        cr_expect_str_eq(b.data, want, "note depth %u", d);
    }
}

Test(format, deep_nesting_10000)
{
    const uint32_t depth = 10000;
    size_t lines = 0;

    for (uint32_t d = 1; d <= depth; d++)
        cr_assert_eq(sertrace_fmt_enter(&b, d, SERTRACE_TAG_LIST, "list", 4, d, 0), 0);
    for (uint32_t d = depth; d >= 1; d--)
        cr_assert_eq(sertrace_fmt_exit(&b, d, SERTRACE_TAG_LIST, d, true, NULL), 0);
    for (size_t i = 0; i < b.len; i++)
        lines += b.data[i] == '\n';
    cr_expect_eq(lines, 2 * depth);
    cr_expect_eq(strlen(b.data), b.len);
    /* The deepest enter line: 9998 bars then "├┬ L: ..." */
    const char *deepest = "├┬ L: <list object at 0x2710>\n";
    const char *at = strstr(b.data, deepest);
    cr_assert_not_null(at);
    size_t bars = 0;
    for (const char *p = at - 3; p >= b.data && memcmp(p, "│", 3) == 0; p -= 3)
        bars++;
    cr_expect_eq(bars, depth - 2);
    /* The last line closes the root. */
    cr_expect_eq(strcmp(b.data + b.len - strlen("└ # L [1 B]\n"), "└ # L [1 B]\n"), 0);
}

static const char *escaped(const char *s, size_t n)
{
    sertrace_buf_clear(&b);
    cr_assert_eq(sertrace_fmt_escape(&b, s, n), 0);
    return b.data ? b.data : "";
}

#define ESC(lit) escaped(lit, sizeof(lit) - 1)

Test(format, escape_controls_and_utf8)
{
    cr_expect_str_eq(ESC("plain.Name_1"), "plain.Name_1");
    cr_expect_str_eq(ESC(""), "");
    cr_expect_str_eq(ESC("a\nb\tc\rd"), "a\\x0ab\\x09c\\x0dd");
    cr_expect_str_eq(ESC("\x1b[31mred"), "\\x1b[31mred");
    cr_expect_str_eq(ESC("nul\0byte"), "nul\\x00byte");
    cr_expect_str_eq(ESC("del\x7f"), "del\\x7f");
    cr_expect_str_eq(ESC("back\\slash"), "back\\\\slash");
    /* Valid UTF-8 is kept: é, €, 😀. */
    cr_expect_str_eq(ESC("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
                     "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    /* C1 control U+0085 (NEL) as \x85. */
    cr_expect_str_eq(ESC("a\xc2\x85z"), "a\\x85z");
    /* U+00A0 (first non-C1 after them) is kept. */
    cr_expect_str_eq(ESC("\xc2\xa0"), "\xc2\xa0");
}

Test(format, escape_invalid_utf8)
{
    /* Stray continuation byte, invalid lead bytes. */
    cr_expect_str_eq(ESC("a\x80z"), "a\\x80z");
    cr_expect_str_eq(ESC("\xff\xfe"), "\\xff\\xfe");
    cr_expect_str_eq(ESC("\xc0\xc1\xf5"), "\\xc0\\xc1\\xf5");
    /* Truncated sequences: lead byte at the end, or followed by ASCII. */
    cr_expect_str_eq(ESC("x\xe2\x82"), "x\\xe2\\x82");
    cr_expect_str_eq(ESC("\xe2(a"), "\\xe2(a");
    /* Overlong encodings of '/' and of U+0000, and of U+20AC in 4 bytes. */
    cr_expect_str_eq(ESC("\xc0\xaf"), "\\xc0\\xaf");
    cr_expect_str_eq(ESC("\xe0\x80\xaf"), "\\xe0\\x80\\xaf");
    cr_expect_str_eq(ESC("\xc0\x80"), "\\xc0\\x80");
    cr_expect_str_eq(ESC("\xf0\x82\x82\xac"), "\\xf0\\x82\\x82\\xac");
    /* UTF-16 surrogates encoded in UTF-8 (CESU style). */
    cr_expect_str_eq(ESC("\xed\xa0\x80"), "\\xed\\xa0\\x80");
    cr_expect_str_eq(ESC("\xed\xbf\xbf"), "\\xed\\xbf\\xbf");
    /* Beyond U+10FFFF. */
    cr_expect_str_eq(ESC("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
    /* Largest valid: U+10FFFF, and U+D7FF / U+E000 around the surrogates. */
    cr_expect_str_eq(ESC("\xf4\x8f\xbf\xbf"), "\xf4\x8f\xbf\xbf");
    cr_expect_str_eq(ESC("\xed\x9f\xbf\xee\x80\x80"), "\xed\x9f\xbf\xee\x80\x80");
}

Test(format, names_are_escaped_in_lines)
{
    const char name[] = "evil\n\xff\x1b]0;x";
    cr_assert_eq(sertrace_fmt_enter(&b, 1, SERTRACE_TAG_INSTANCE, name, sizeof name - 1, 0x1, 0),
                 0);
    cr_expect_str_eq(b.data, "┬ O: <evil\\x0a\\xff\\x1b]0;x object at 0x1>\n");
    sertrace_buf_clear(&b);
    cr_assert_eq(sertrace_fmt_note(&b, 0, "k\n", 2, "v\x07", 2), 0);
    cr_expect_str_eq(b.data, " @ k\\x0a = v\\x07\n");
    sertrace_buf_clear(&b);
    cr_assert_eq(sertrace_fmt_flag_line(&b, 1, "bad\tpath", 8), 0);
    cr_expect_str_eq(b.data, "│ !! bad\\x09path\n");
}

static const char *json(const char *s, size_t n)
{
    sertrace_buf_clear(&b);
    cr_assert_eq(sertrace_fmt_json_string(&b, s, n), 0);
    return b.data;
}

#define JSON(lit) json(lit, sizeof(lit) - 1)

Test(format, json_strings)
{
    cr_expect_str_eq(JSON(""), "\"\"");
    cr_expect_str_eq(JSON("abc"), "\"abc\"");
    cr_expect_str_eq(JSON("q\"b\\"), "\"q\\\"b\\\\\"");
    cr_expect_str_eq(JSON("\n\r\t\b\f"), "\"\\n\\r\\t\\b\\f\"");
    cr_expect_str_eq(JSON("\x01\x1f"), "\"\\u0001\\u001f\"");
    cr_expect_str_eq(JSON("nul\0x"), "\"nul\\u0000x\"");
    cr_expect_str_eq(JSON("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
    cr_expect_str_eq(JSON("a\xff"
                          "b"),
                     "\"a\xef\xbf\xbd"
                     "b\"");
    cr_expect_str_eq(JSON("\xed\xa0\x80"), "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
    cr_expect_str_eq(JSON("\xc0\xaf"), "\"\xef\xbf\xbd\xef\xbf\xbd\"");
}

Test(format, parse_size_good)
{
    static const struct {
        const char *text;
        uint64_t value;
    } cases[] = {
        {"0", 0},
        {"1048576", 1048576},
        {"64K", 65536},
        {"64k", 65536},
        {"64KB", 65536},
        {"64KiB", 65536},
        {"1.5MiB", 1572864},
        {"1.5M", 1572864},
        {"2 MB", 2097152},
        {" 3G ", (uint64_t)3 << 30},
        {"1T", (uint64_t)1 << 40},
        {"0.5K", 512},
        {"100B", 100},
        {"100 b", 100},
        {"18446744073709551615", UINT64_MAX},
        {"16777215T", (uint64_t)16777215 << 40},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t v = 12345;
        cr_expect_eq(sertrace_parse_size(cases[i].text, &v), 0, "'%s'", cases[i].text);
        cr_expect_eq(v, cases[i].value, "'%s' gave %llu", cases[i].text, (unsigned long long)v);
    }
}

Test(format, parse_size_bad)
{
    static const char *const bad[] = {
        "",
        " ",
        "-1",
        "+1",
        "K",
        "1X",
        "1KX",
        "1 K B",
        "1.5",
        "1.",
        ".5K",
        "abc",
        "18446744073709551616",
        "16777216T",
        "1e3",
        "0x10",
        "1,5M",
        "5 MiBs",
        NULL,
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 777;
        cr_expect_eq(sertrace_parse_size(bad[i], &v), -1, "'%s'", bad[i] ? bad[i] : "(null)");
        cr_expect_eq(v, 777, "output untouched for '%s'", bad[i] ? bad[i] : "(null)");
    }
}

Test(format, buffer_append_and_clear)
{
    cr_assert_eq(sertrace_buf_appendf(&b, "%s-%d", "x", 42), 0);
    cr_expect_str_eq(b.data, "x-42");
    /* Long formatted output grows the buffer. */
    char big[3000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cr_assert_eq(sertrace_buf_appendf(&b, "%s", big), 0);
    cr_expect_eq(b.len, 4 + sizeof big - 1);
    size_t cap = b.cap;
    sertrace_buf_clear(&b);
    cr_expect_eq(b.len, 0);
    cr_expect_eq(b.cap, cap);
    cr_expect_str_eq(b.data, "");
}

/* The flags' one wording (issue 12 item 10): the live tree and the report
 * both build them here. */
Test(format, exit_flags_one_wording)
{
    sertrace_buf b = SERTRACE_BUF_INIT;
    cr_assert_eq(sertrace_fmt_exit_flags(&b, SERTRACE_FMT_FLAG_OVERSIZED, 1024, false), 0);
    cr_expect_str_eq(b.data, "!! OVERSIZED (\xe2\x89\xa5 1.0 KiB)");
    sertrace_buf_clear(&b);
    cr_assert_eq(sertrace_fmt_exit_flags(&b, SERTRACE_FMT_FLAG_OVERSIZED, 65536, true), 0);
    cr_expect_str_eq(b.data, "!! OVERSIZED (\xe2\x89\xa5 65536 B)");
    sertrace_buf_clear(&b);
    /* the order is fixed, whatever the bits */
    cr_assert_eq(sertrace_fmt_exit_flags(&b,
                                         SERTRACE_FMT_FLAG_UNSERIALIZABLE |
                                             SERTRACE_FMT_FLAG_FAILED | SERTRACE_FMT_FLAG_OVERSIZED,
                                         2048, false),
                 0);
    cr_expect_str_eq(b.data,
                     "!! OVERSIZED (\xe2\x89\xa5 2.0 KiB) !! FAILED inside !! UNSERIALIZABLE");
    sertrace_buf_clear(&b);
    cr_assert_eq(sertrace_fmt_exit_flags(&b, 0x3ffu & ~SERTRACE_FMT_FLAG_OVERSIZED, 0, false), 0);
    cr_expect_str_eq(b.data, "?? never closed !! UNFINISHED !! FAILED inside !! UNSERIALIZABLE "
                             "?? exit lost ?? enter lost ?? records lost inside ?? malformed "
                             "positions ?? its exit may be a later node's");
    sertrace_buf_clear(&b);
    cr_assert_eq(sertrace_fmt_exit_flags(&b, 0, 0, false), 0);
    cr_expect_eq(b.len, 0);
    sertrace_buf_free(&b);
}

Test(format, unserializable_one_wording)
{
    sertrace_buf b = SERTRACE_BUF_INIT;
    static const char name[] = "notify_workflow.<locals>.render";
    static const char msg[] = "Can't get local object";
    static const char path[] = "State.cb";
    cr_assert_eq(sertrace_fmt_unserializable(&b, SERTRACE_TAG_FUNCTION, name, sizeof name - 1, msg,
                                             sizeof msg - 1, path, sizeof path - 1),
                 0);
    cr_expect_str_eq(b.data, "UNSERIALIZABLE F2 notify_workflow.<locals>.render: Can't get local "
                             "object at State.cb");
    sertrace_buf_clear(&b);
    /* no node open: no tag or type; no path: no " at " */
    cr_assert_eq(sertrace_fmt_unserializable(&b, -1, NULL, 0, msg, sizeof msg - 1, NULL, 0), 0);
    cr_expect_str_eq(b.data, "UNSERIALIZABLE: Can't get local object");
    sertrace_buf_clear(&b);
    cr_assert_eq(
        sertrace_fmt_unserializable(&b, SERTRACE_TAG_LIST, NULL, 0, NULL, 0, path, sizeof path - 1),
        0);
    cr_expect_str_eq(b.data, "UNSERIALIZABLE L ? at State.cb");
    sertrace_buf_free(&b);
}

Test(format, exit_line_with_a_bound)
{
    sertrace_buf b = SERTRACE_BUF_INIT;
    cr_assert_eq(sertrace_fmt_exit_bound(&b, 2, SERTRACE_TAG_DICT, 2048, false, SERTRACE_FMT_LOWER,
                                         "!! FAILED inside"),
                 0);
    cr_expect_str_eq(b.data,
                     "\xe2\x94\x82\xe2\x94\x94 # D2 [\xe2\x89\xa5 2.0 KiB]  !! FAILED inside\n");
    sertrace_buf_clear(&b);
    cr_assert_eq(
        sertrace_fmt_exit_bound(&b, 1, SERTRACE_TAG_LIST, 7, true, SERTRACE_FMT_UPPER, NULL), 0);
    cr_expect_str_eq(b.data, "\xe2\x94\x94 # L [\xe2\x89\xa4 7 B]\n");
    sertrace_buf_clear(&b);
    cr_assert_eq(
        sertrace_fmt_exit_bound(&b, 1, SERTRACE_TAG_LIST, 7, true, SERTRACE_FMT_UNKNOWN, ""), 0);
    cr_expect_str_eq(b.data, "\xe2\x94\x94 # L [? 7 B]\n");
    sertrace_buf_clear(&b);
    /* exact: the same line as sertrace_fmt_exit */
    cr_assert_eq(
        sertrace_fmt_exit_bound(&b, 1, SERTRACE_TAG_LIST, 7, true, SERTRACE_FMT_EXACT, NULL), 0);
    cr_expect_str_eq(b.data, "\xe2\x94\x94 # L [7 B]\n");
    cr_expect_str_eq(sertrace_fmt_bound_text(SERTRACE_FMT_EXACT), "");
    sertrace_buf_free(&b);
}

/* The buffer's first error sticks (as SQLite's sqlite3_str): after a
 * failed append every append is a no-op returning -1, the text written
 * before the failure stays, and only a clear forgets the error. */
Test(format, buf_error_sticks)
{
    cr_assert_eq(sertrace_buf_append(&b, "abc", 3), 0);
    cr_assert_eq(sertrace_buf_error(&b), 0);
    /* a length no buffer can hold: refused before the bytes are read */
    cr_assert_eq(sertrace_fmt_escape(&b, "x", (size_t)-1), -1);
    cr_assert_eq(sertrace_buf_error(&b), -1);
    cr_assert_eq(sertrace_buf_append(&b, "def", 3), -1);
    cr_assert_eq(sertrace_buf_appendf(&b, "%d", 42), -1);
    cr_assert_eq(sertrace_fmt_size(&b, 1024, true), -1);
    cr_assert_eq(b.len, 3);
    cr_assert_str_eq(b.data, "abc");
    cr_assert_eq(sertrace_buf_error(&b), -1);
    sertrace_buf_clear(&b);
    cr_assert_eq(sertrace_buf_error(&b), 0);
    cr_assert_eq(sertrace_buf_append(&b, "def", 3), 0);
    cr_assert_str_eq(b.data, "def");
}
