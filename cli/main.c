/* main.c -- entry point of the `sertrace` command: subcommand dispatch.
 *
 * `sertrace SUBCOMMAND [OPTIONS] ...` -- the subcommands live in session.c
 * (record, start, stop, snapshot: LTTng sessions through liblttng-ctl) and
 * report.c (report: a babeltrace2 graph with the sertrace plugin).  This
 * file only knows their names, prints the top-level help and the version
 * (with the path of the babeltrace2 plugin `report` would load), and maps
 * an unknown subcommand to the usage exit status (2).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "config.h"

static const char top_help[] =
    "Usage: sertrace [--help | --version]\n"
    "       sertrace SUBCOMMAND [OPTIONS] [ARGS]\n"
    "\n"
    "Record what serializers write, object by object, and report it.\n"
    "\n"
    "Subcommands:\n"
    "  record    run a command under a new LTTng session, then report where the\n"
    "            trace is (sertrace record [-o DIR] [--snapshot] -- CMD ...)\n"
    "  start     create and start a session that traces every process of your\n"
    "            user that loaded sertrace, including ones already running\n"
    "  stop      stop and destroy a session made by `start` (the trace stays)\n"
    "  snapshot  write the in-memory buffers of a --snapshot session to disk\n"
    "  report    print the trees or the summary of a trace (or of a live session)\n"
    "  inspect   the size tree of stored pickle bytes, without a trace and\n"
    "            without unpickling them\n"
    "  diff      what grew between two states (trace directories or pickle\n"
    "            files), by path pattern and by type\n"
    "\n"
    "Run `sertrace SUBCOMMAND --help` for the options of each.  `sertrace\n"
    "--version` also prints which babeltrace2 plugin `report` would load.\n"
    "\n"
    "Exit status: 0 success, 1 runtime error, 2 usage error; `record` exits\n"
    "with the status of the command it ran; `report` exits 3 when part of the\n"
    "trace could not be read (the rest is reported); `inspect` exits 4 when the\n"
    "input is malformed or a limit was reached; `diff` exits 3 when a limit of\n"
    "--fail-if-grows or --budget was exceeded.\n";

int main(int argc, char **argv)
{
    const char *sub;

    if (argc < 2) {
        fputs(top_help, stderr);
        return SERTRACE_CLI_USAGE;
    }
    sub = argv[1];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
        fputs(top_help, stdout);
        return SERTRACE_CLI_OK;
    }
    if (strcmp(sub, "--version") == 0 || strcmp(sub, "-V") == 0) {
        printf("sertrace %s\n", SERTRACE_VERSION);
        (void)sertrace_cli_print_plugin(stdout);
        return SERTRACE_CLI_OK;
    }
    if (strcmp(sub, "record") == 0)
        return sertrace_cli_record(argc - 1, argv + 1);
    if (strcmp(sub, "start") == 0)
        return sertrace_cli_start(argc - 1, argv + 1);
    if (strcmp(sub, "stop") == 0)
        return sertrace_cli_stop(argc - 1, argv + 1);
    if (strcmp(sub, "snapshot") == 0)
        return sertrace_cli_snapshot(argc - 1, argv + 1);
    if (strcmp(sub, "report") == 0)
        return sertrace_cli_report(argc - 1, argv + 1);
    if (strcmp(sub, "inspect") == 0)
        return sertrace_cli_inspect(argc - 1, argv + 1);
    if (strcmp(sub, "diff") == 0)
        return sertrace_cli_diff(argc - 1, argv + 1);
    sertrace_cli_err("unknown subcommand '%s' (try `sertrace --help`)", sub);
    return SERTRACE_CLI_USAGE;
}
