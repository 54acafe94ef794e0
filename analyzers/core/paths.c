/* paths.c -- node labels and paths (paths.h).
 *
 * A path is built from the open chain a visitor sees at node_exit, one
 * segment per level, so it costs nothing unless a writer asks for it.
 * A writer that needs the paths of many nodes of one deep chain keeps the
 * chain's text and appends one segment per level as levels open
 * (sertrace_path_segment_append): the summary's top entries, the path
 * patterns; building whole paths per node would cost O(depth) each.  The root reads as
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

int sertrace_path_segment_append(sertrace_buf *b, const sertrace_dump_state *d,
                                 const sertrace_node *chain, uint32_t i, bool pattern)
{
    if (i == 0) { /* the root: its type's short name */
        size_t len;
        const char *name = sertrace_core_type_name(d, chain[0].type, &len);
        if (name == NULL)
            return sertrace_buf_append(b, "?", 1);
        size_t start = len;
        while (start > 0 && name[start - 1] != '.')
            start--;
        return sertrace_fmt_escape(b, name + start, len - start);
    }
    const sertrace_node *n = &chain[i];
    if (n->label_kind == SERTRACE_LABEL_NONE)
        return sertrace_buf_append(b, "/?", 2);
    unsigned mode = SERTRACE_FMT_LABEL_PATH | (pattern ? SERTRACE_FMT_LABEL_PATTERN : 0);
    return sertrace_label_append(b, d, n->label_kind, n->label,
                                 sertrace_node_is_state(&chain[i - 1]), mode);
}

int sertrace_path_append(sertrace_buf *b, const sertrace_dump_state *d, const sertrace_node *chain,
                         uint32_t depth, bool pattern)
{
    for (uint32_t i = 0; i < depth; i++)
        sertrace_path_segment_append(b, d, chain, i, pattern);
    return sertrace_buf_error(b);
}
