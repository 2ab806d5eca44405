/* softrnic: the command-line front end of the software RDMA NIC.
 * Dispatches to one subcommand per file (tools/cmd_*.c). */
#include "tools/cli.h"

#include <stdarg.h>
#include <string.h>

const struct cli_cmd *const cli_cmds[] = {
	&cli_devices, &cli_info, &cli_qps, &cli_stats, &cli_capture, &cli_run, &cli_clean, &cli_settings,
	&cli_version, &cli_help, NULL,
};

const struct cli_cmd *cli_find(const char *name)
{
	for (int i = 0; cli_cmds[i]; i++)
		if (strcmp(cli_cmds[i]->name, name) == 0)
			return cli_cmds[i];
	return NULL;
}

void cli_usage(FILE *out)
{
	fprintf(out, "usage: softrnic COMMAND [ARGS...]\n\ncommands:\n");
	for (int i = 0; cli_cmds[i]; i++)
		fprintf(out, "  %-9s %s\n", cli_cmds[i]->name, cli_cmds[i]->summary);
	fprintf(out, "\nRun 'softrnic COMMAND --help' for a command's options.\n");
}

int cli_is_help(const char *arg)
{
	return arg && (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0);
}

void cli_err(const char *fmt, ...)
{
	va_list ap;

	fputs("softrnic: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int main(int argc, char **argv)
{
	const struct cli_cmd *cmd;

	if (argc < 2) {
		cli_usage(stderr);
		return 2;
	}
	if (cli_is_help(argv[1]))
		return cli_help.run(1, argv + 1);
	if (strcmp(argv[1], "--version") == 0)
		return cli_version.run(1, argv + 1);
	cmd = cli_find(argv[1]);
	if (!cmd) {
		cli_err("unknown command '%s'", argv[1]);
		cli_usage(stderr);
		return 2;
	}
	if (argc > 2 && cli_is_help(argv[2])) {
		cmd->usage(stdout);
		return 0;
	}
	return cmd->run(argc - 1, argv + 1);
}
