/* paths.c -- node labels and paths (paths.h).
 *
 * A path is built from the open chain a visitor sees at node_exit, so it
 * costs nothing unless a writer asks for it (the summary's top nodes, the
 * path patterns), and no per-node string is ever kept.  The root reads as
 * its type's short name (the text after the last '.' of its recorded
 * "module.qualname": a nested class loses its outer part, the error
 * paths of serializers/pickle use the qualname).
 */
#include "paths.h"

int sertrace_label_append(sertrace_buf *b, const sertrace_dump_state *d, uint8_t kind,
                          uint64_t value, bool in_state, unsigned mode)
{
    const char *name = NULL;
    size_t len = 0;
    if ((kind == SERTRACE_LABEL_KEY || kind == SERTRACE_LABEL_ATTR) && value <= UINT32_MAX)
        name = sertrace_core_type_name(d, (uint32_t)value, &len);
    if (in_state)
        mode |= SERTRACE_FMT_LABEL_IN_STATE;
    return sertrace_fmt_label(b, kind, value, name, len, mode);
}

int sertrace_path_append(sertrace_buf *b, const sertrace_dump_state *d, const sertrace_node *chain,
                         uint32_t depth, bool pattern)
{
    unsigned mode = SERTRACE_FMT_LABEL_PATH | (pattern ? SERTRACE_FMT_LABEL_PATTERN : 0);
    if (depth == 0)
        return 0;
    size_t len;
    const char *name = sertrace_core_type_name(d, chain[0].type, &len);
    if (name == NULL) {
        sertrace_buf_append(b, "?", 1);
    } else {
        size_t start = len;
        while (start > 0 && name[start - 1] != '.')
            start--;
        name += start;
        len -= start;
        sertrace_fmt_escape(b, name, len);
    }
    for (uint32_t i = 1; i < depth; i++) {
        const sertrace_node *n = &chain[i];
        if (n->label_kind == SERTRACE_LABEL_NONE)
            sertrace_buf_append(b, "/?", 2);
        else
            sertrace_label_append(b, d, n->label_kind, n->label,
                                  sertrace_node_is_state(&chain[i - 1]), mode);
    }
    return sertrace_buf_error(b);
}
