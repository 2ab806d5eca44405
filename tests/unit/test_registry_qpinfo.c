/* net/registry: the QP info a QPN's owner publishes for same-host peers
 * (net_registry_publish / net_registry_qpinfo): round trip, only the
 * owner may publish, claim and free clear it, the generation moves on
 * every change, and a reader in another process never sees a torn copy
 * while the owner rewrites it continuously. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net/registry.h"

static int failures;
#define CHECK(c, ...) do { if (!(c)) { fprintf(stderr, "FAIL %d: ", __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); failures++; } } while (0)

/* Every field derived from k: a torn copy mixes two k's. */
static void make_info(struct net_reg_qpinfo *in, uint32_t k)
{
	memset(in, 0, sizeof(*in));
	in->pid = getpid();
	in->mrdir_nonce = k;
	in->pd_handle = k * 3;
	in->access = k * 5;
	in->state = (uint8_t)k;
	in->type = (uint8_t)(k >> 8);
	in->dfamily = (uint16_t)(k * 7);
	in->dqpn = k * 11;
	for (int i = 0; i < 16; i++)
		in->dip[i] = (uint8_t)(k + (uint32_t)i);
}

static int consistent(const struct net_reg_qpinfo *in)
{
	uint32_t k = in->mrdir_nonce;
	struct net_reg_qpinfo want;

	make_info(&want, k);
	want.pid = in->pid;
	return !memcmp(&want, in, sizeof(want));
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int main(void)
{
	char dev[64], path[128];
	struct net_registry *reg;
	struct net_reg_qpinfo in, out;
	uint32_t qpn, seq1 = 0, seq2 = 0;
	const _Atomic uint32_t *gen;
	int sync[2], ret;
	pid_t child;

	snprintf(dev, sizeof(dev), "testqi%d", (int)getpid());
	snprintf(path, sizeof(path), "/dev/shm/softrnic-%s-v3", dev);
	alarm(60);
	reg = net_registry_open(dev);
	if (!reg) {
		perror("net_registry_open");
		return 1;
	}
	CHECK(net_registry_alloc(reg, 6000, AF_INET, &qpn) == 0, "alloc");

	/* a fresh claim has nothing published */
	CHECK(net_registry_qpinfo(reg, qpn, &out, NULL) == -ENOENT, "fresh slot has no info");
	make_info(&in, 42);
	CHECK(net_registry_publish(reg, qpn, &in) == 0, "publish");
	CHECK(net_registry_qpinfo(reg, qpn, &out, &seq1) == 0 && !memcmp(&in, &out, sizeof(in)),
	      "round trip");
	CHECK(!(seq1 & 1), "generation %u is even", seq1);
	gen = net_registry_qpinfo_seq(reg, qpn);
	CHECK(gen && *gen == seq1, "generation word matches the snapshot's");
	make_info(&in, 43);
	net_registry_publish(reg, qpn, &in);
	CHECK(net_registry_qpinfo(reg, qpn, &out, &seq2) == 0 && out.mrdir_nonce == 43 &&
	      seq2 != seq1 && *gen == seq2, "republish moves the generation (%u -> %u)",
	      seq1, seq2);
	printf("publish/read round trip; generation %u -> %u on republish\n", seq1, seq2);

	/* out of range and unowned QPNs */
	CHECK(net_registry_qpinfo(reg, 0, &out, NULL) == -ENOENT, "qpn 0");
	CHECK(net_registry_qpinfo(reg, NET_REG_SLOTS, &out, NULL) == -ENOENT, "qpn too big");
	CHECK(net_registry_publish(reg, NET_REG_SLOTS + 5, &in) == -ENOENT, "publish out of range");
	CHECK(net_registry_qpinfo_seq(reg, 1) == NULL, "no generation word for qpn 1");

	/* Another process: sees the info, may not publish over it; then
	 * reads continuously while we rewrite: never a torn copy. */
	if (pipe(sync))
		return 1;
	child = fork();
	if (child == 0) {
		struct net_registry *r = net_registry_open(dev);
		struct net_reg_qpinfo o, mine;
		uint64_t end;
		long reads = 0, torn = 0, again = 0;
		char c = 1;
		int bad = 0;

		if (!r)
			_exit(2);
		if (net_registry_qpinfo(r, qpn, &o, NULL) || o.mrdir_nonce != 43 ||
		    o.pid != getppid())
			bad |= 1;
		make_info(&mine, 7);
		if (net_registry_publish(r, qpn, &mine) != -ENOENT)
			bad |= 2;
		if (write(sync[1], &c, 1) != 1)
			_exit(3);
		end = now_ms() + 700;
		while (now_ms() < end) {
			int rr = net_registry_qpinfo(r, qpn, &o, NULL);

			if (rr == -EAGAIN) {
				again++;
				continue;
			}
			if (rr) {
				bad |= 4;
				break;
			}
			reads++;
			if (!consistent(&o))
				torn++;
		}
		if (torn)
			bad |= 8;
		printf("child: %ld consistent reads, %ld torn, %ld busy\n", reads, torn, again);
		fflush(stdout);
		_exit(bad);
	}
	{
		char c;
		uint64_t end;
		uint32_t k = 100;

		CHECK(read(sync[0], &c, 1) == 1, "sync");
		end = now_ms() + 900;
		while (now_ms() < end) {
			make_info(&in, k++);
			net_registry_publish(reg, qpn, &in);
		}
		CHECK(waitpid(child, &ret, 0) == child && WIFEXITED(ret) && WEXITSTATUS(ret) == 0,
		      "child saw the info, could not publish, never read a torn copy (status %d)",
		      WIFEXITED(ret) ? WEXITSTATUS(ret) : -1);
		printf("owner rewrote the info %u times meanwhile\n", k - 100);
	}

	/* clearing, then free: gone */
	CHECK(net_registry_publish(reg, qpn, NULL) == 0, "clear");
	CHECK(net_registry_qpinfo(reg, qpn, &out, NULL) == -ENOENT, "cleared info reads as none");
	make_info(&in, 9);
	net_registry_publish(reg, qpn, &in);
	seq1 = *gen;
	net_registry_free(reg, qpn);
	CHECK(net_registry_qpinfo(reg, qpn, &out, NULL) == -ENOENT && *gen != seq1,
	      "freed QPN has no info and a new generation");
	CHECK(net_registry_publish(reg, qpn, &in) == -ENOENT, "publish on a QPN not ours");
	printf("clear and free remove the info; only the owner publishes\n");

	net_registry_close(reg);
	unlink(path);
	if (failures) {
		printf("%d failures\n", failures);
		return 1;
	}
	printf("PASS\n");
	return 0;
}
