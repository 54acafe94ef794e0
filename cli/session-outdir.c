/* session-outdir.c -- the output directory of `sertrace record | start`.
 *
 * A directory given with -o must be empty or new; the default is a fresh
 * timestamped one.  A directory sertrace created is removed again when it
 * ends up with no trace in it (and the empty directories LTTng leaves are
 * pruned), and where the trace is, or why there is none, is said on
 * stderr.  (A move out of session.c: see session.h.)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <lttng/lttng.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "session.h"
#include "sertrace/schema.h"

/* ---- output directory ------------------------------------------------- */

void timestamp(char *out, size_t n)
{
    time_t now = time(NULL);
    struct tm tm;

    localtime_r(&now, &tm);
    strftime(out, n, "%Y%m%d-%H%M%S", &tm);
}

static int dir_is_empty(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    int empty = 1;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            empty = 0;
            break;
        }
    }
    closedir(d);
    return empty;
}

/* Check or create the output directory and store its absolute path.
 * A directory that exists must be empty and writable; a new one is
 * created (its parent must exist).  Runs before any session exists. */
int prepare_outdir(const char *requested, struct session_state *st)
{
    char def[64];
    const char *dir = requested;
    struct stat sb;

    if (dir == NULL) {
        char ts[32];
        timestamp(ts, sizeof(ts));
        snprintf(def, sizeof(def), "sertrace-trace-%s", ts);
        dir = def;
    }
    if (stat(dir, &sb) == 0) {
        int empty;
        if (!S_ISDIR(sb.st_mode)) {
            sertrace_cli_err("output directory %s exists and is not a directory", dir);
            return -1;
        }
        empty = dir_is_empty(dir);
        if (empty < 0) {
            sertrace_cli_err("cannot read output directory %s: %s", dir, strerror(errno));
            return -1;
        }
        if (!empty) {
            sertrace_cli_err("output directory %s exists and is not empty: choose "
                             "another with -o DIR (sertrace never mixes two traces)",
                             dir);
            return -1;
        }
        if (access(dir, W_OK | X_OK) != 0) {
            sertrace_cli_err("output directory %s is not writable: %s", dir, strerror(errno));
            return -1;
        }
    } else if (errno == ENOENT) {
        if (mkdir(dir, 0775) != 0) {
            sertrace_cli_err("cannot create output directory %s: %s", dir, strerror(errno));
            return -1;
        }
        st->created_dir = true;
    } else {
        sertrace_cli_err("cannot create output directory %s: %s", dir, strerror(errno));
        return -1;
    }
    /* The session daemon resolves paths itself: give it an absolute one. */
    if (realpath(dir, st->outdir) == NULL) {
        sertrace_cli_err("cannot resolve output directory %s: %s", dir, strerror(errno));
        if (st->created_dir)
            rmdir(dir);
        st->created_dir = false;
        return -1;
    }
    return 0;
}

void forget_outdir(struct session_state *st)
{
    if (st->created_dir && st->outdir[0] != '\0')
        sertrace_cli_remove_tree(st->outdir);
    st->created_dir = false;
}

/* Report where the trace is.  Returns 1 when traces were found under
 * `dir`, 0 when not (the caller says so, after cleaning up). */
int report_trace(const char *dir, const char *what)
{
    if (sertrace_cli_find_traces(dir, NULL) <= 0)
        return 0;
    fprintf(stderr, "sertrace: %s written to %s\n", what, dir);
    fprintf(stderr, "sertrace: view it with `sertrace report %s`\n", dir);
    return 1;
}

static int rmdir_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (type == FTW_DP)
        (void)rmdir(path); /* fails, harmlessly, on a non-empty directory */
    return 0;
}

/* A session that recorded nothing still leaves directories behind (the
 * session daemon makes DIR/ust/... when the session starts): remove the
 * empty directories of the subtrees LTTng writes (ust/, kernel/,
 * snapshot-N-DATE-K/) below `dir`.  Only rmdir(): a file is never
 * removed, nor a directory holding one, nor anything else under `dir`. */
static void prune_empty_lttng_dirs(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        char path[PATH_MAX];
        struct stat sb;
        if (strcmp(e->d_name, "ust") != 0 && strcmp(e->d_name, "kernel") != 0 &&
            strncmp(e->d_name, "snapshot-", 9) != 0)
            continue;
        if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path) ||
            lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
            continue;
        (void)nftw(path, rmdir_entry, 32, FTW_DEPTH | FTW_PHYS);
    }
    closedir(d);
}

/* No trace under `dir`: clean up and say so truthfully.  `remove_dir`:
 * `dir` itself goes too -- all of it when sertrace created it in this
 * process (`record`), else only if it is empty once LTTng's empty
 * directories are gone (`stop`: `start` wanted it empty or missing, so an
 * empty DIR holds nothing of anyone's).  A pre-existing directory given
 * to `record` is left as it was given: empty. */
void report_no_trace(struct session_state *st, const char *dir, bool remove_dir)
{
    const char *removed = NULL;

    if (st->created_dir && strcmp(dir, st->outdir) == 0) {
        forget_outdir(st);
        removed = "";
    } else {
        prune_empty_lttng_dirs(dir);
        if (remove_dir && rmdir(dir) == 0)
            removed = "the empty directory ";
    }
    if (removed != NULL)
        sertrace_cli_err("no sertrace events: did the program import sertrace / link "
                         "libsertrace? (no trace was written; removed %s%s)",
                         removed, dir);
    else
        sertrace_cli_err("no sertrace events: did the program import sertrace / link "
                         "libsertrace? (no trace was written under %s)",
                         dir);
}
