/* softrnic settings: every SOFTRNIC_* variable, its value in this
 * environment, its default and what it does; exit 1 if any is not valid,
 * so a script can check its environment before it starts a job. */
#include "tools/cli.h"
#include "net/settings.h"

#include <stdlib.h>
#include <string.h>

static void settings_usage(FILE *out)
{
	fprintf(out, "usage: softrnic settings\n"
		"Lists every SOFTRNIC_* variable: its value here, its default, what it does.\n"
		"Exit status 1 if a value is not valid (each is named on stderr).\n");
}

static void value_text(enum srn_setting_id id, char *buf, size_t n)
{
	const struct srn_setting *s = &srn_settings[id];
	const char *text = getenv(s->name);
	long v;

	if (!text || !*text)
		snprintf(buf, n, "(unset)");
	else if (s->kind == SRN_KIND_STRING || srn_setting_parse(id, text, &v) == 0)
		snprintf(buf, n, "%s", text);
	else
		snprintf(buf, n, "%s (NOT VALID)", text);
}

static int settings_run(int argc, char **argv)
{
	(void)argv;
	if (argc > 1) {
		cli_err("settings: takes no arguments");
		return 2;
	}
	for (int id = 0; id < SRN_SET_COUNT; id++) {
		const struct srn_setting *s = &srn_settings[id];
		char val[256];

		value_text((enum srn_setting_id)id, val, sizeof(val));
		printf("%s\n  value:   %s\n  default: %s\n  %s\n", s->name, val, s->dflt_text, s->help);
		if (s->kind == SRN_KIND_WORD) {
			printf("  accepts: ");
			for (int i = 0; s->words[i]; i++)
				printf("%s%s", i ? ", " : "", s->words[i]);
			printf("\n");
		} else if (s->kind == SRN_KIND_INT) {
			printf("  accepts: %ld to %ld\n", s->min, s->max);
		}
	}
	return srn_settings_check(stderr) ? 1 : 0;
}

const struct cli_cmd cli_settings = {
	.name = "settings",
	.summary = "list the SOFTRNIC_* variables and check their values",
	.run = settings_run,
	.usage = settings_usage,
};
