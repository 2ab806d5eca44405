/* softrnic help [COMMAND] */
#include "tools/cli.h"

static void help_usage(FILE *out)
{
	fprintf(out, "usage: softrnic help [COMMAND]\n"
		"Lists the commands, or shows one command's help.\n");
}

static int help_run(int argc, char **argv)
{
	const struct cli_cmd *cmd;

	if (argc < 2) {
		cli_usage(stdout);
		return 0;
	}
	cmd = cli_find(argv[1]);
	if (!cmd) {
		cli_err("unknown command '%s'", argv[1]);
		cli_usage(stderr);
		return 2;
	}
	cmd->usage(stdout);
	return 0;
}

const struct cli_cmd cli_help = {
	.name = "help",
	.summary = "show this list, or a command's help",
	.run = help_run,
	.usage = help_usage,
};
