/* tests/runtime/test_labels.c -- edge labels in the runtime (schema v5):
 * sertrace_name() interns a label text once per dump in the TYPE index
 * space (a NAME record), sertrace_name_known() finds it again,
 * sertrace_label() writes one LABEL record before the node it labels, and
 * the live text tree prints the label after the enter line's repr, with
 * ".name" for a key under an instance's state. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "runtime-internal.h"
#include "sertrace/sertrace.h"

static int type_key, name_key_cache, name_key_k;

/* instance > (state) dict > .cache dict > ['k e y'] list > [3] list */
static void labelled_dump(void)
{
    sertrace_dump *d = sertrace_dump_begin("pickle", 5);
    cr_assert_not_null(d);
    uint32_t t = sertrace_type(d, &type_key, "dict");
    cr_assert_eq(sertrace_name_known(d, &name_key_cache), 0);
    uint32_t cache = sertrace_name(d, &name_key_cache, "cache", 5);
    cr_assert_eq(cache, t + 1, "one index space for types and names");
    cr_assert_eq(sertrace_name_known(d, &name_key_cache), cache);
    cr_assert_eq(sertrace_name(d, &name_key_cache, "other", 5), cache, "interned once");
    uint32_t k = sertrace_name(d, &name_key_k, "k e y", 5);
    sertrace_enter(d, SERTRACE_TAG_INSTANCE, t, 0x10, 0, 0);
    sertrace_label(d, SERTRACE_LABEL_ROLE, SERTRACE_ROLE_STATE);
    sertrace_enter(d, SERTRACE_TAG_DICT, t, 0x20, 2, 1);
    sertrace_label(d, SERTRACE_LABEL_KEY, cache);
    sertrace_enter(d, SERTRACE_TAG_DICT, t, 0x30, 2, 2);
    sertrace_label(d, SERTRACE_LABEL_KEY, k);
    sertrace_enter(d, SERTRACE_TAG_LIST, t, 0x40, 2, 3);
    sertrace_label(d, SERTRACE_LABEL_POS, 3);
    sertrace_enter(d, SERTRACE_TAG_LIST, t, 0x50, 1, 4);
    sertrace_exit(d, 5);
    sertrace_label(d, SERTRACE_LABEL_POS, 9); /* no enter follows: dropped */
    sertrace_exit(d, 6);
    sertrace_exit(d, 7);
    sertrace_exit(d, 8);
    sertrace_enter(d, SERTRACE_TAG_LIST, t, 0x60, 1, 8); /* no label */
    sertrace_exit(d, 9);
    sertrace_exit(d, 10);
    sertrace_dump_end(d, 10, SERTRACE_STATUS_OK);
}

Test(runtime, name_and_label_records)
{
    labelled_dump();
    struct recs r = decode_dump(only_dump());
    size_t names = 0, labels = 0;
    for (size_t i = 0; i < r.n; i++) {
        const struct rec *x = &r.v[i];
        if (x->op == SERTRACE_REC_NAME) {
            names++;
            cr_expect(x->type == 2 || x->type == 3);
        }
        if (x->op == SERTRACE_REC_LABEL) {
            labels++;
            /* each label is right before its ENTER, except the dropped one */
            if (x->length != 9)
                cr_expect_eq(r.v[i + 1].op, SERTRACE_REC_ENTER);
            else
                cr_expect_eq(r.v[i + 1].op, SERTRACE_REC_EXIT);
        }
    }
    cr_expect_eq(names, 2, "a NAME record per text, once per dump");
    cr_expect_eq(labels, 5);
    /* the first LABEL: ROLE STATE, before the depth-2 ENTER */
    for (size_t i = 0; i < r.n; i++)
        if (r.v[i].op == SERTRACE_REC_LABEL) {
            cr_expect_eq(r.v[i].tag, SERTRACE_LABEL_ROLE);
            cr_expect_eq(r.v[i].length, SERTRACE_ROLE_STATE);
            cr_expect_eq(r.v[i + 1].depth, 2);
            break;
        }
}

Test(runtime, labels_in_the_live_tree)
{
    char path[64];
    int fd = temp_fd(path);
    cr_assert_eq(sertrace_internal_configure(path, NULL, NULL, "1", 2), 0);
    sertrace_internal_set_hooks(NULL);
    labelled_dump();
    char *out = read_fd_all(fd);
    cr_expect(strstr(out, "\xe2\x94\x9c\xe2\x94\xac D2: <dict object at 0x20> len=1  (state)\n"),
              "%s", out);
    cr_expect(strstr(out, "len=1  .cache\n"), "%s", out);
    cr_expect(strstr(out, "len=1  ['k e y']\n"), "%s", out);
    cr_expect(strstr(out, "len=0  [3]\n"), "%s", out);
    cr_expect(strstr(out, "<dict object at 0x60> len=0\n"), "a node without label: %s", out);
    cr_expect(strstr(out, "[9]") == NULL, "the dropped label shows nowhere: %s", out);
    close(fd);
    unlink(path);
}
