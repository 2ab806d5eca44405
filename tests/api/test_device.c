/* Black-box checks of the device list: order (srn_lo first), naming,
 * NULL num_devices, stable GUIDs and indexes, the ibv_device fields
 * programs print, SOFTRNIC_DEVICES selection and renaming (in a fresh
 * process each, since the list is built once per process), and
 * open/close of every device many times. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "tests/lib/t_util.h"

/* The device names, comma-joined, on stdout: run in a fresh process
 * (the list is built once per process, so fork alone would not do). */
static int print_list(void)
{
	struct ibv_device **l;
	int num = -1, rc;

	l = ibv_get_device_list(&num);
	if (!l)
		return 2;

	for (int i = 0; i < num; i++)
		printf("%s%s", i ? "," : "", ibv_get_device_name(l[i]));
	rc = l[num] == NULL ? 0 : 3;
	ibv_free_device_list(l);
	return rc;
}

/* Re-executes this test with SOFTRNIC_DEVICES=spec; its output into out.
 * Returns the child's exit status. */
static int list_with(const char *spec, char *out, size_t len)
{
	int fd[2], st;
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	if (pipe(fd))
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		setenv("SOFTRNIC_DEVICES", spec, 1);
		execl("/proc/self/exe", "test_device", "--list", (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	while (got < len - 1 && (n = read(fd[0], out + got, len - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(fd[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv)
{
	struct ibv_device **l1, **l2;
	int n1 = -1, n2 = -1;
	char buf[512];

	if (argc > 1 && !strcmp(argv[1], "--list"))
		return print_list();
	unsetenv("SOFTRNIC_DEVICES");
	l1 = ibv_get_device_list(&n1);
	T_OK(l1 != NULL, "ibv_get_device_list");
	if (!l1)
		return 1;
	T_OK(n1 >= 1, "at least one device (%d)", n1);
	T_OK(l1[n1] == NULL, "list is NULL-terminated");
	T_OK(n1 >= 1 && !strcmp(ibv_get_device_name(l1[0]), "srn_lo"), "srn_lo is first");
	l2 = ibv_get_device_list(NULL);
	T_OK(l2 != NULL && l2 != l1, "second list (num_devices NULL) is a new array");
	for (n2 = 0; l2 && l2[n2]; n2++)
		;
	T_OK(n2 == n1, "same number of devices twice");
	for (int i = 0; i < n1 && l2; i++) {
		struct ibv_device *d = l1[i];
		const char *name = ibv_get_device_name(d);

		T_OK(l2[i] == d, "%s: same device object in both lists", name);
		T_OK(!strncmp(name, "srn_", 4), "%s: named srn_*", name);
		T_OK(ibv_get_device_index(d) == i, "%s: index %d", name, i);
		T_OK(ibv_get_device_guid(d) != 0, "%s: non-zero node GUID", name);
		T_OK(d->node_type == IBV_NODE_CA, "%s: node_type CA", name);
		T_OK(d->transport_type == IBV_TRANSPORT_IB, "%s: transport IB (RoCE)", name);
		T_OK(!strncmp(d->dev_name, "srn_uverbs", 10), "%s: dev_name %s", name, d->dev_name);
		T_OK(strstr(d->ibdev_path, name) != NULL, "%s: ibdev_path %s", name, d->ibdev_path);
		for (int k = 0; k < 20; k++) {
			struct ibv_context *c = ibv_open_device(d);

			if (!c || ibv_close_device(c)) {
				T_OK(0, "%s: open/close round %d", name, k);
				break;
			}
			if (k == 19)
				T_OK(1, "%s: 20 open/close rounds", name);
		}
	}
	{
		struct ibv_context *a = ibv_open_device(l1[0]), *b = ibv_open_device(l1[0]);

		T_OK(a && b && a != b, "two contexts on one device at once");
		T_OK(a && b && a->async_fd >= 0 && b->async_fd >= 0 && a->async_fd != b->async_fd,
		     "each context has its own async_fd");
		T_OK(a && a->cmd_fd >= 0, "cmd_fd is a valid descriptor");
		T_OK(a && a->num_comp_vectors >= 1, "num_comp_vectors >= 1");
		if (a)
			ibv_close_device(a);
		if (b)
			ibv_close_device(b);
	}
	{
		struct ibv_device fake;

		memset(&fake, 0, sizeof(fake));
		errno = 0;
		T_OK(ibv_open_device(&fake) == NULL && errno == EINVAL,
		     "ibv_open_device of a foreign device -> NULL/EINVAL");
		errno = 0;
		T_OK(ibv_open_device(NULL) == NULL && errno == EINVAL,
		     "ibv_open_device(NULL) -> NULL/EINVAL");
	}
	ibv_free_device_list(l1);
	ibv_free_device_list(l2);
	ibv_free_device_list(NULL);

	T_OK(list_with("lo", buf, sizeof(buf)) == 0 && !strcmp(buf, "srn_lo"),
	     "SOFTRNIC_DEVICES=lo -> srn_lo (got '%s')", buf);
	T_OK(list_with("lo=myrnic", buf, sizeof(buf)) == 0 && !strcmp(buf, "myrnic"),
	     "SOFTRNIC_DEVICES=lo=myrnic renames (got '%s')", buf);
	T_OK(list_with("nosuchif0,lo", buf, sizeof(buf)) == 0 && !strcmp(buf, "srn_lo"),
	     "unknown interface skipped (got '%s')", buf);
	T_OK(list_with("nosuchif0", buf, sizeof(buf)) == 0 && !strcmp(buf, ""),
	     "only unknown interfaces -> empty list, not an error");
	T_OK(list_with("lo=a,lo=b", buf, sizeof(buf)) == 0 && !strcmp(buf, "a,b"),
	     "one interface twice under two names, in order (got '%s')", buf);
	T_OK(list_with("lo=a,lo=a", buf, sizeof(buf)) == 0 && !strcmp(buf, "a"),
	     "duplicate device name dropped (got '%s')", buf);
	T_OK(list_with("", buf, sizeof(buf)) == 0 && !strncmp(buf, "srn_lo", 6),
	     "empty SOFTRNIC_DEVICES means discovery (got '%s')", buf);
	return t_summary();
}
