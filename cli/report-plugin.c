/* report-plugin.c -- `sertrace report`: finding the babeltrace2 plugins,
 * and turning babeltrace2's error causes into one line.
 *
 * The sertrace plugin is looked up in $SERTRACE_PLUGIN_PATH (colon
 * separated), then -- only when this process is the build tree's own
 * uninstalled binary -- in that build's plugin directory, then in the
 * directory it was installed to at build time, then through babeltrace2's
 * own search (BABELTRACE_PLUGIN_PATH, user and system plugin directories).
 * An error is the root cause, with babeltrace2's object addresses dropped;
 * the whole chain with --verbose.  (A move out of report.c: see report.h.)
 */
#define _GNU_SOURCE
#include <babeltrace2/babeltrace.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "format.h"
#include "report.h"

/* ---- errors ------------------------------------------------------------ */

/* -v/--verbose: babeltrace2's whole error chain, component logging at
 * WARNING, and the plugin path.  Set once by the option parser. */
bool verbose;

/* Drop the "NAME-addr=0x..." fields babeltrace2 puts in its messages
 * (object addresses mean nothing to a user) from `s`, in place. */
static void drop_addresses(char *s)
{
    char *a;

    while ((a = strstr(s, "addr=0x")) != NULL) {
        char *key = a, *end = a + 7;
        while (key > s && key[-1] != ' ' && key[-1] != ',' && key[-1] != '(')
            key--;
        while ((*end >= '0' && *end <= '9') || (*end >= 'a' && *end <= 'f') ||
               (*end >= 'A' && *end <= 'F'))
            end++;
        if (end[0] == ',' && end[1] == ' ')
            end += 2;
        else if (key > s + 1 && key[-1] == ' ' && key[-2] == ',')
            key -= 2; /* last field: drop the separator before it */
        memmove(key, end, strlen(end) + 1);
    }
    /* "Message: " with every field gone. */
    size_t len = strlen(s);
    if (len >= 2 && s[len - 2] == ':' && s[len - 1] == ' ')
        s[len - 2] = '\0';
}

/* Take this thread's babeltrace2 error: copy the first line of its root
 * cause into `root` (empty when there is no error); with --verbose, print
 * the whole chain on stderr (outermost first, as "  MODULE: MESSAGE");
 * then release it.  The root cause is the cause appended first (index 0
 * here: the most specific, e.g. "Invalid LTTng live URL format: Unknown
 * protocol") that a component or plugin wrote; the library's own causes
 * ("Component class's "query" method failed: query-exec-addr=0x...")
 * only say which call failed, so they are used, cut before their
 * key=value list, when nothing else explains the error.  Returns true
 * when `root` came from a component or plugin (an explanation). */
bool take_bt_error(char *root, size_t n)
{
    const bt_error *err = bt_current_thread_take_error();
    uint64_t count, pick = 0;
    const char *msg;
    size_t len;
    bool explained = false;

    root[0] = '\0';
    if (err == NULL)
        return false;
    count = bt_error_get_cause_count(err);
    while (pick < count &&
           strcmp(bt_error_cause_get_module_name(bt_error_borrow_cause_by_index(err, pick)),
                  "libbabeltrace2") == 0)
        pick++;
    if (count > 0) {
        bool library = pick == count;
        explained = !library;
        msg = bt_error_cause_get_message(bt_error_borrow_cause_by_index(err, library ? 0 : pick));
        len = strcspn(msg, "\n");
        if (library && strstr(msg, ": ") != NULL && (size_t)(strstr(msg, ": ") - msg) < len)
            len = (size_t)(strstr(msg, ": ") - msg);
        snprintf(root, n, "%.*s", (int)(len < n ? len : n - 1), msg);
        drop_addresses(root);
    }
    for (uint64_t i = count; verbose && i-- > 0;) {
        const bt_error_cause *c = bt_error_borrow_cause_by_index(err, i);
        const char *msg = bt_error_cause_get_message(c);
        int len = (int)strcspn(msg, "\n");
        fprintf(stderr, "  %s: %.*s\n", bt_error_cause_get_module_name(c), len, msg);
    }
    bt_error_release(err);
    return explained;
}

/* One line: "sertrace: WHAT: ROOT CAUSE", the chain only with --verbose
 * (printed below that line). */
void print_bt_error(const char *what)
{
    char root[512];

    if (verbose) {
        sertrace_cli_err("%s; babeltrace2's error, outermost cause first:", what);
        take_bt_error(root, sizeof(root));
        return;
    }
    take_bt_error(root, sizeof(root));
    if (root[0] != '\0')
        sertrace_cli_err("%s: %s (-v shows babeltrace2's whole error)", what, root);
    else
        sertrace_cli_err("%s", what);
}

/* ---- plugins ------------------------------------------------------------ */

static const bt_plugin *plugin_from_dir(const char *dir, const char *name)
{
    const bt_plugin_set *set = NULL;
    const bt_plugin *found = NULL;
    struct stat sb;

    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return NULL;
    if (bt_plugin_find_all_from_dir(dir, BT_FALSE, BT_FALSE, &set) !=
        BT_PLUGIN_FIND_ALL_FROM_DIR_STATUS_OK)
        goto end;
    for (uint64_t i = 0; i < bt_plugin_set_get_plugin_count(set); i++) {
        const bt_plugin *p = bt_plugin_set_borrow_plugin_by_index_const(set, i);
        if (strcmp(bt_plugin_get_name(p), name) == 0) {
            found = p;
            bt_plugin_get_ref(found);
            break;
        }
    }
end:
    bt_plugin_set_put_ref(set);
    bt_current_thread_clear_error();
    return found;
}

/* True when this process is the uninstalled `sertrace` of the build tree
 * that config.h describes: /proc/self/exe (the kernel's resolved path of
 * our executable) is that build's executable.  An installed copy, or a
 * binary of another build tree, answers false. */
static bool running_from_build_tree(void)
{
    char self[PATH_MAX], built[PATH_MAX];
    ssize_t n;

    if (SERTRACE_PLUGIN_BUILD_DIR[0] == '\0')
        return false;
    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return false;
    self[n] = '\0';
    if (realpath(SERTRACE_BUILD_EXE, built) == NULL)
        return false;
    return strcmp(self, built) == 0;
}

/* The sertrace plugin, looked up in $SERTRACE_PLUGIN_PATH, then (only for
 * the build tree's own binary) in the build's plugin directory, so that a
 * build-tree `sertrace` never silently runs a stale installed plugin; then
 * in the install directory; then in babeltrace2's search path.  *from
 * names the place it was found. */
const bt_plugin *find_sertrace_plugin(const char **from)
{
    const char *env = getenv("SERTRACE_PLUGIN_PATH");
    const bt_plugin *p = NULL;

    *from = "$SERTRACE_PLUGIN_PATH";
    if (env != NULL && *env != '\0') {
        char *copy = strdup(env), *save = NULL;
        for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d && !p;
             d = strtok_r(NULL, ":", &save))
            p = plugin_from_dir(d, "sertrace");
        free(copy);
    }
    if (p == NULL && running_from_build_tree()) {
        *from = "the build tree";
        p = plugin_from_dir(SERTRACE_PLUGIN_BUILD_DIR, "sertrace");
    }
    if (p == NULL) {
        *from = "the install directory";
        p = plugin_from_dir(SERTRACE_PLUGIN_INSTALL_DIR, "sertrace");
    }
    if (p == NULL) {
        *from = "babeltrace2's plugin path";
        if (bt_plugin_find("sertrace", BT_TRUE, BT_TRUE, BT_TRUE, BT_TRUE, BT_FALSE, &p) !=
            BT_PLUGIN_FIND_STATUS_OK)
            p = NULL;
    }
    bt_current_thread_clear_error();
    return p;
}

/* The places find_sertrace_plugin() looks, for messages. */
void plugin_search_text(char *out, size_t n)
{
    snprintf(out, n, "$SERTRACE_PLUGIN_PATH, %s%s%s and babeltrace2's plugin path",
             running_from_build_tree() ? SERTRACE_PLUGIN_BUILD_DIR : "",
             running_from_build_tree() ? ", " : "", SERTRACE_PLUGIN_INSTALL_DIR);
}

int sertrace_cli_print_plugin(FILE *out)
{
    const char *from = NULL;
    const bt_plugin *p = find_sertrace_plugin(&from);
    char where[2 * PATH_MAX + 128];

    if (p == NULL) {
        plugin_search_text(where, sizeof(where));
        fprintf(out, "babeltrace2 plugin: not found (looked in %s)\n", where);
        return -1;
    }
    fprintf(out, "babeltrace2 plugin: %s (from %s)\n",
            bt_plugin_get_path(p) ? bt_plugin_get_path(p) : "(built in)", from);
    bt_plugin_put_ref(p);
    return 0;
}

const bt_plugin *find_std_plugin(const char *name)
{
    const bt_plugin *p = NULL;

    if (bt_plugin_find(name, BT_FALSE, BT_FALSE, BT_TRUE, BT_TRUE, BT_FALSE, &p) !=
        BT_PLUGIN_FIND_STATUS_OK) {
        /* Not in the system dir: try the standard environment too. */
        bt_current_thread_clear_error();
        if (bt_plugin_find(name, BT_TRUE, BT_TRUE, BT_TRUE, BT_TRUE, BT_FALSE, &p) !=
            BT_PLUGIN_FIND_STATUS_OK)
            p = NULL;
    }
    bt_current_thread_clear_error();
    return p;
}
