/* labels.c -- the text of an edge label (schema v5): one path segment.
 *
 * A node's label says what it is to its parent: a position ("[3]"), a
 * dict key ("['name']", or ".name" when the parent is an instance's state,
 * whose keys are attribute names), an int key ("[-3]"), a key that is not
 * shown ("[…]"), an attribute (".name") or a role in a reduce ("(args)",
 * "(reconstructor)", "{element}", "{key}"; the state itself has no segment
 * of its own in a path).  The live text tree (probes/text.c), the report's
 * tree, the summary's paths and the path patterns all print labels through
 * this one function, so a path reads the same everywhere, and the same as
 * the paths of the pickler's error records (serializers/pickle/trace.c).
 * Label texts come from the trace: they are escaped like every other
 * string (sertrace_fmt_escape).
 */
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "sertrace/schema.h"

/* True for an ASCII identifier (letters, digits, '_', not starting with a
 * digit): such a key reads as an attribute.  Non-ASCII identifiers keep
 * the subscript form, which is never wrong. */
static bool is_ascii_identifier(const char *s, size_t n)
{
    if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    return true;
}

int sertrace_fmt_exit_oob(sertrace_buf *b, size_t line_start, uint64_t oob, bool exact)
{
    if (oob == 0 || b->err || line_start >= b->len)
        return b->err;
    char *close = memchr(b->data + line_start, ']', b->len - line_start);
    if (close == NULL)
        return 0;
    size_t at = (size_t)(close - b->data);
    sertrace_buf ins = SERTRACE_BUF_INIT;
    sertrace_buf_append(&ins, " + ", 3);
    sertrace_fmt_size(&ins, oob, exact);
    sertrace_buf_append(&ins, " out of band", 12);
    int rc = sertrace_buf_error(&ins);
    if (rc == 0)
        rc = sertrace_buf_reserve(b, ins.len);
    if (rc == 0) {
        memmove(b->data + at + ins.len, b->data + at, b->len - at + 1);
        memcpy(b->data + at, ins.data, ins.len);
        b->len += ins.len;
    }
    sertrace_buf_free(&ins);
    return rc;
}

static int append_name(sertrace_buf *b, const char *name, size_t name_len)
{
    if (name == NULL)
        return sertrace_buf_append(b, "?", 1);
    return sertrace_fmt_escape(b, name, name_len);
}

int sertrace_fmt_label(sertrace_buf *b, uint8_t kind, uint64_t value, const char *name,
                       size_t name_len, unsigned mode)
{
    bool pattern = (mode & SERTRACE_FMT_LABEL_PATTERN) != 0;
    bool in_state = (mode & SERTRACE_FMT_LABEL_IN_STATE) != 0;

    switch (kind) {
    case SERTRACE_LABEL_NONE:
        return 0;
    case SERTRACE_LABEL_POS:
        if (pattern)
            return sertrace_buf_append(b, "[*]", 3);
        return sertrace_buf_appendf(b, "[%llu]", (unsigned long long)value);
    case SERTRACE_LABEL_KEY:
        if (in_state && name != NULL && is_ascii_identifier(name, name_len)) {
            sertrace_buf_append(b, ".", 1);
            return sertrace_buf_append(b, name, name_len);
        }
        if (pattern)
            return sertrace_buf_append(b, "[*]", 3);
        sertrace_buf_append(b, "['", 2);
        append_name(b, name, name_len);
        return sertrace_buf_append(b, "']", 2);
    case SERTRACE_LABEL_INT: {
        if (pattern)
            return sertrace_buf_append(b, "[*]", 3);
        long long v = (value & 1) ? -(long long)(value >> 1) - 1 : (long long)(value >> 1);
        return sertrace_buf_appendf(b, "[%lld]", v);
    }
    case SERTRACE_LABEL_HIDDEN:
        return sertrace_buf_append(b, pattern ? "[*]" : "[\xe2\x80\xa6]", pattern ? 3 : 5);
    case SERTRACE_LABEL_ATTR:
        sertrace_buf_append(b, ".", 1);
        return append_name(b, name, name_len);
    case SERTRACE_LABEL_ROLE:
        switch (value) {
        case SERTRACE_ROLE_STATE:
            return (mode & SERTRACE_FMT_LABEL_PATH) ? 0 : sertrace_buf_append(b, "(state)", 7);
        case SERTRACE_ROLE_ARGS:
            return sertrace_buf_append(b, "(args)", 6);
        case SERTRACE_ROLE_CALLABLE:
            return sertrace_buf_append(b, "(reconstructor)", 15);
        case SERTRACE_ROLE_ELEMENT:
            return sertrace_buf_append(b, "{element}", 9);
        case SERTRACE_ROLE_DICT_KEY:
            return sertrace_buf_append(b, "{key}", 5);
        default:
            return sertrace_buf_appendf(b, "(role %llu)", (unsigned long long)value);
        }
    default:
        return sertrace_buf_appendf(b, "(label %u)", (unsigned)kind);
    }
}
