/* softrnic run [OPTIONS] -- CMD [ARGS...]: runs an unmodified verbs program
 * on softrnic.  It only prepends softrnic's library directory to
 * LD_LIBRARY_PATH (so the program's libibverbs.so.1 and librdmacm.so.1
 * are ours), adds the sysfs view's path-mapping library to LD_PRELOAD and
 * sets SOFTRNIC_* options, then execs: the exit status is the program's
 * own.  Other SOFTRNIC_* variables pass through unchanged. */
#include "tools/cli.h"
#include "net/settings.h"

#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void run_usage(FILE *out)
{
	fprintf(out, "usage: softrnic run [OPTIONS] [--] CMD [ARGS...]\n"
		"Runs CMD with softrnic as its libibverbs/librdmacm.\n"
		"  --devices LIST   set SOFTRNIC_DEVICES (IFNAME[:iwarp][=DEVNAME],...)\n"
		"  --log LEVEL      set SOFTRNIC_LOG (e.g. debug)\n"
		"  --pcap FILE      set SOFTRNIC_PCAP (capture every packet)\n"
		"  --transport auto|udp  set SOFTRNIC_TRANSPORT\n"
		"Exit status: CMD's, or 127 if CMD is not found.\n");
}

static int has_lib(const char *dir)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/libibverbs.so.1", dir) >= (int)sizeof(path))
		return 0;
	return access(path, R_OK) == 0;
}

/* <dir of this executable>/../lib (build tree), else the private library
 * directory of an installed tree, as CMake placed it relative to bin/. */
static int find_libdir(char out[PATH_MAX])
{
	char exe[PATH_MAX], *dir;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return -1;
	exe[n] = '\0';
	dir = dirname(exe);
	if (snprintf(out, PATH_MAX, "%s/../lib", dir) < PATH_MAX && has_lib(out))
		return 0;
	if (snprintf(out, PATH_MAX, "%s/" SRN_LIBDIR_FROM_BIN, dir) < PATH_MAX && has_lib(out))
		return 0;
	return -1;
}

/* The sysfs view's path-mapping library goes into LD_PRELOAD (after
 * whatever is there already), so the program and its children read
 * /sys/class/infiniband and /dev/infiniband as softrnic's view of them
 * (docs/sysfs-view.md).  SOFTRNIC_SYSFS_VIEW=0 leaves it out. */
static void preload_sysfs_map(const char *libdir)
{
	const char *old = getenv("LD_PRELOAD");
	char lib[PATH_MAX], *val;

	if (!srn_setting(SRN_SET_SYSFS_VIEW, NULL) ||
	    snprintf(lib, sizeof(lib), "%s/libsoftrnic_sysfs_map.so", libdir) >= (int)sizeof(lib) ||
	    access(lib, R_OK) != 0 || (old && strstr(old, lib)))
		return;
	if (asprintf(&val, "%s%s%s", old && *old ? old : "", old && *old ? ":" : "", lib) < 0)
		return;
	setenv("LD_PRELOAD", val, 1);
	free(val);
}

static int prepend_libdir(void)
{
	char libdir[PATH_MAX], real[PATH_MAX];
	const char *old = getenv("LD_LIBRARY_PATH");
	char *val;
	int rc;

	if (find_libdir(libdir)) {
		cli_err("run: cannot find softrnic's libibverbs.so.1 next to this program");
		return -1;
	}
	if (realpath(libdir, real))
		memcpy(libdir, real, sizeof(real));
	if (old && *old)
		rc = asprintf(&val, "%s:%s", libdir, old);
	else
		rc = asprintf(&val, "%s", libdir);
	if (rc < 0)
		return -1;
	rc = setenv("LD_LIBRARY_PATH", val, 1);
	free(val);
	preload_sysfs_map(libdir);
	return rc;
}

/* A sanitizer build of softrnic (SOFTRNIC_SANITIZE) is a library that
 * needs the sanitizer runtime loaded first, which unmodified programs do
 * not link: preload the runtimes this executable itself was loaded with.
 * Leak reports are off unless ASAN_OPTIONS says otherwise: the programs
 * run are not ours, and many do not free everything at exit (our own
 * teardown paths are leak-checked by the api tests). */
static void preload_sanitizers(void)
{
	enum { NRT = 3 };
	FILE *f = fopen("/proc/self/maps", "re");
	char line[PATH_MAX + 128], seen[NRT][PATH_MAX] = { "", "", "" };
	const char *const rt[NRT] = { "/libasan.so", "/libubsan.so", "/libtsan.so" };
	const char *asan = getenv("ASAN_OPTIONS");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');

		if (!path)
			continue;
		path[strcspn(path, "\n")] = '\0';
		for (int i = 0; i < NRT; i++)
			if (!seen[i][0] && strstr(path, rt[i]) && strlen(path) < PATH_MAX)
				memcpy(seen[i], path, strlen(path) + 1);
	}
	fclose(f);
	for (int i = NRT - 1; i >= 0; i--) {
		const char *old = getenv("LD_PRELOAD");
		char *val;

		if (!seen[i][0])
			continue;
		if (asprintf(&val, "%s%s%s", seen[i], old && *old ? ":" : "", old ? old : "") < 0)
			return;
		setenv("LD_PRELOAD", val, 1);
		free(val);
	}
	if (seen[0][0] && !(asan && strstr(asan, "detect_leaks"))) {
		char *val;

		if (asprintf(&val, "%s%sdetect_leaks=0", asan ? asan : "",
			     asan && *asan ? ":" : "") < 0)
			return;
		setenv("ASAN_OPTIONS", val, 1);
		free(val);
	}
}

static int run_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "devices", required_argument, NULL, 'D' },
		{ "log", required_argument, NULL, 'L' },
		{ "pcap", required_argument, NULL, 'P' },
		{ "transport", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	/* "+": stop at CMD, so CMD's own options are left alone. */
	optind = 1;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'D': setenv("SOFTRNIC_DEVICES", optarg, 1); break;
		case 'T':
		case 'L': {
			enum srn_setting_id id = c == 'T' ? SRN_SET_TRANSPORT : SRN_SET_LOG;
			long v;

			if (srn_setting_parse(id, optarg, &v) != 0) {
				cli_err("run: %s '%s' is not valid (see softrnic settings)",
					c == 'T' ? "--transport" : "--log", optarg);
				return 2;
			}
			setenv(srn_settings[id].name, optarg, 1);
			break;
		}
		case 'P':
			/* "--pcap -- CMD" would capture into a file named "--". */
			if (optarg[0] == '-' || !optarg[0]) {
				cli_err("run: --pcap needs a FILE, not '%s'", optarg);
				return 2;
			}
			setenv("SOFTRNIC_PCAP", optarg, 1);
			break;
		case 'h': run_usage(stdout); return 0;
		default: run_usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		cli_err("run: no command given (softrnic run -- CMD [ARGS...])");
		return 2;
	}
	if (prepend_libdir())
		return 1;
	/* Writes (or refreshes) the sysfs view before CMD looks at it. */
	ibv_free_device_list(ibv_get_device_list(NULL));
	preload_sanitizers();
	execvp(argv[optind], argv + optind);
	if (errno == ENOENT) {
		cli_err("%s: command not found", argv[optind]);
		return 127;
	}
	cli_err("%s: %s", argv[optind], strerror(errno));
	return 126;
}

const struct cli_cmd cli_run = {
	.name = "run",
	.summary = "run a verbs program on softrnic: run -- CMD [ARGS...]",
	.run = run_run,
	.usage = run_usage,
};
