/* cli.h -- internal interface between the files of the `sertrace` command.
 *
 * main.c parses the subcommand name and hands argc/argv (argv[0] being the
 * subcommand) to one of the entry points below.  Each entry point parses
 * its own options, prints its own --help, and returns the process exit
 * status: SERTRACE_CLI_OK (0), SERTRACE_CLI_ERROR (1, runtime error) or
 * SERTRACE_CLI_USAGE (2, bad command line), except `record`, which returns
 * the traced command's status.  Nothing here is exported outside cli/.
 */
#ifndef SERTRACE_CLI_H
#define SERTRACE_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum sertrace_cli_status {
    SERTRACE_CLI_OK = 0,
    SERTRACE_CLI_ERROR = 1,
    SERTRACE_CLI_USAGE = 2,
};

/* Subcommands (session.c, report.c). */
int sertrace_cli_record(int argc, char **argv);
int sertrace_cli_start(int argc, char **argv);
int sertrace_cli_stop(int argc, char **argv);
int sertrace_cli_snapshot(int argc, char **argv);
int sertrace_cli_report(int argc, char **argv);
/* `inspect` (inspect.c): also returns 4 when the input is inconclusive. */
int sertrace_cli_inspect(int argc, char **argv);
int sertrace_cli_diff(int argc, char **argv);

/* Print "babeltrace2 plugin: PATH (from PLACE)" -- the sertrace plugin that
 * `report` would load, found as report.c describes -- or "... not found
 * (looked in ...)" on `out`.  0 found, -1 not found.  (report.c) */
int sertrace_cli_print_plugin(FILE *out);

/* Print "sertrace: " + message + newline on stderr. */
void sertrace_cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parse a size option value ("64M", "1048576", "1.5MiB") with
 * sertrace_parse_size; on failure print an error naming `option` and
 * return -1. */
int sertrace_cli_parse_size(const char *option, const char *text, uint64_t *out);

/* Parse a non-negative decimal integer option value (no sign, no junk,
 * at most `max`); on failure print an error naming `option`, return -1. */
int sertrace_cli_parse_uint(const char *option, const char *text, uint64_t max, uint64_t *out);

/* Human size for messages ("1.9 KiB"), written into `out` (>= 32 bytes). */
const char *sertrace_cli_human_size(uint64_t bytes, char out[32]);

/* Number of directories under `root` (recursively, `root` included) that
 * directly contain a regular file named `metadata`: the CTF traces.  When
 * `dirs` is not NULL, *dirs receives a malloc'd array of malloc'd paths
 * (caller frees with sertrace_cli_free_dirs).  Returns -1 (errno set) if
 * `root` cannot be walked. */
int sertrace_cli_find_traces(const char *root, char ***dirs);
void sertrace_cli_free_dirs(char **dirs, int n);

/* Total size in bytes of the regular files under `root`. */
uint64_t sertrace_cli_tree_bytes(const char *root);

/* Remove `path` and everything below it (like rm -rf).  0 or -1. */
int sertrace_cli_remove_tree(const char *path);

#endif /* SERTRACE_CLI_H */
