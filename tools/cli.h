/* softrnic CLI: one file per subcommand; each takes (argc, argv) with
 * argv[0] = the subcommand's name and returns the process exit status. */
#ifndef SRN_CLI_H
#define SRN_CLI_H

#include <stdio.h>

struct cli_cmd {
	const char *name;
	const char *summary;                 /* one line for `softrnic help` */
	int (*run)(int argc, char **argv);
	void (*usage)(FILE *out);            /* full help of the subcommand */
};

extern const struct cli_cmd cli_devices, cli_info, cli_qps, cli_stats, cli_capture, cli_run, cli_clean, cli_settings,
	cli_version,
	cli_help;

/* All subcommands, NULL-terminated (tools/softrnic.c). */
extern const struct cli_cmd *const cli_cmds[];
const struct cli_cmd *cli_find(const char *name);
void cli_usage(FILE *out);

/* "--help" or "-h" as the only/first option of a subcommand. */
int cli_is_help(const char *arg);

/* Prints "softrnic: ..." and a newline on stderr. */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
