/* softrnic version */
#include "tools/cli.h"
#include "verbs/version.h"

static void version_usage(FILE *out)
{
	fprintf(out, "usage: softrnic version\n"
		"Prints the softrnic version and the rdma-core ABI it replaces.\n");
}

static int version_run(int argc, char **argv)
{
	(void)argv;
	if (argc > 1) {
		cli_err("version: takes no arguments");
		return 2;
	}
	printf("softrnic %s (libibverbs.so.1 / librdmacm.so.1, rdma-core v44 ABI)\n",
	       SRN_VERSION);
	return 0;
}

const struct cli_cmd cli_version = {
	.name = "version",
	.summary = "print the version",
	.run = version_run,
	.usage = version_usage,
};
