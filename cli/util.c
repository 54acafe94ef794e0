/* util.c -- small helpers shared by the subcommands of `sertrace`.
 *
 * Error messages, option value parsing (sizes go through the project's one
 * size parser, sertrace_parse_size in format/, so "64M" means the same in
 * every tool), and the file-tree walks the command needs: finding the CTF
 * traces under a directory (every directory that directly holds a
 * `metadata` file: per-UID sessions have one per user and ABI, per-PID
 * sessions one per process, snapshots one per snapshot), measuring a trace
 * and removing an output directory that `record` created itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "format.h"

void sertrace_cli_err(const char *fmt, ...)
{
    va_list ap;

    fputs("sertrace: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int sertrace_cli_parse_size(const char *option, const char *text, uint64_t *out)
{
    if (text == NULL || sertrace_parse_size(text, out) != 0) {
        sertrace_cli_err("%s: invalid size '%s' (examples: 4096, 64K, 8M, 1.5GiB)", option,
                         text ? text : "");
        return -1;
    }
    return 0;
}

int sertrace_cli_parse_uint(const char *option, const char *text, uint64_t max, uint64_t *out)
{
    const char *p = text;
    uint64_t v = 0;

    if (p == NULL || *p == '\0')
        goto bad;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            goto bad;
        if (v > (max - (uint64_t)(*p - '0')) / 10)
            goto bad;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *out = v;
    return 0;
bad:
    sertrace_cli_err("%s: expected an integer between 0 and %llu, got '%s'", option,
                     (unsigned long long)max, text ? text : "");
    return -1;
}

const char *sertrace_cli_human_size(uint64_t bytes, char out[32])
{
    sertrace_buf b = SERTRACE_BUF_INIT;

    if (sertrace_fmt_size(&b, bytes, false) == 0 && b.len > 0 && b.len < 32)
        memcpy(out, b.data, b.len + 1);
    else
        snprintf(out, 32, "%llu B", (unsigned long long)bytes);
    sertrace_buf_free(&b);
    return out;
}

/* nftw has no user pointer: the walks below use these file-scope
 * variables.  The command is single-threaded. */
static char **walk_dirs;
static int walk_count;
static int walk_cap;
static int walk_failed;
static uint64_t walk_bytes;

static int collect_trace(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    const char *base = path + ftw->base;
    size_t dir_len;
    char *dir;

    if (type != FTW_F || !S_ISREG(st->st_mode) || strcmp(base, "metadata") != 0)
        return 0;
    dir_len = ftw->base > 1 ? (size_t)ftw->base - 1 : (size_t)ftw->base;
    dir = strndup(path, dir_len);
    if (dir == NULL)
        goto oom;
    if (walk_count == walk_cap) {
        int cap = walk_cap ? walk_cap * 2 : 8;
        char **grown = realloc(walk_dirs, (size_t)cap * sizeof(*grown));
        if (grown == NULL) {
            free(dir);
            goto oom;
        }
        walk_dirs = grown;
        walk_cap = cap;
    }
    walk_dirs[walk_count++] = dir;
    return 0;
oom:
    walk_failed = 1;
    return 1;
}

static int compare_paths(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int sertrace_cli_find_traces(const char *root, char ***dirs)
{
    int n;

    walk_dirs = NULL;
    walk_count = walk_cap = walk_failed = 0;
    if (nftw(root, collect_trace, 32, FTW_PHYS) != 0 || walk_failed) {
        int saved = walk_failed ? ENOMEM : errno;
        sertrace_cli_free_dirs(walk_dirs, walk_count);
        walk_dirs = NULL;
        errno = saved;
        return -1;
    }
    n = walk_count;
    if (n > 1)
        qsort(walk_dirs, (size_t)n, sizeof(*walk_dirs), compare_paths);
    if (dirs != NULL)
        *dirs = walk_dirs;
    else
        sertrace_cli_free_dirs(walk_dirs, n);
    walk_dirs = NULL;
    return n;
}

void sertrace_cli_free_dirs(char **dirs, int n)
{
    for (int i = 0; i < n; i++)
        free(dirs[i]);
    free(dirs);
}

static int add_bytes(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)path;
    (void)ftw;
    if (type == FTW_F && S_ISREG(st->st_mode))
        walk_bytes += (uint64_t)st->st_size;
    return 0;
}

uint64_t sertrace_cli_tree_bytes(const char *root)
{
    walk_bytes = 0;
    (void)nftw(root, add_bytes, 32, FTW_PHYS);
    return walk_bytes;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (type == FTW_DP)
        return rmdir(path) == 0 ? 0 : -1;
    return unlink(path) == 0 ? 0 : -1;
}

int sertrace_cli_remove_tree(const char *path)
{
    return nftw(path, remove_entry, 32, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}
