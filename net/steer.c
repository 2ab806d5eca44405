/* net/steer: the census that tells each engine its place in the port-4791
 * group, and the program built from it (see steer.h). */
#include "net/steer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/proc.h"

#ifndef SO_ATTACH_REUSEPORT_CBPF
#define SO_ATTACH_REUSEPORT_CBPF 51
#endif

enum { STEER_MAGIC = 0x53545231 /* "STR1" */, NO_IDX = 0xff };

struct steer_member {
	_Atomic uint64_t owner;      /* net_proc_word of its process; 0 = free */
	_Atomic uint32_t claim;      /* census << 8 | index it got a probe for */
	uint16_t port;               /* its engine's own port (the registry's) */
	uint8_t prog_idx;            /* its index when the program last changed */
	uint8_t pad;
	uint32_t ahead_lo, ahead_hi; /* QPNs it will allocate next */
};

struct net_steer_table {
	uint32_t magic;
	uint32_t secret;
	_Atomic uint32_t census;     /* the current round, 24 bits, never 0 */
	uint32_t n;                  /* members it probed */
	struct steer_member m[NET_STEER_MEMBERS];
};

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void net_steer_lock(struct net_steer *s)
{
	pthread_mutex_lock(&s->mu);
	while (flock(s->fd, LOCK_EX) < 0 && errno == EINTR)
		;
}

void net_steer_unlock(struct net_steer *s)
{
	flock(s->fd, LOCK_UN);
	pthread_mutex_unlock(&s->mu);
}

int net_steer_open(struct net_steer *s, int family, const uint8_t *ip)
{
	struct stat st, nst;
	unsigned long long ns = stat("/proc/self/ns/net", &nst) == 0 ? (unsigned long long)nst.st_ino : 0;
	int len = family == AF_INET ? 4 : 16, fd, e;
	char hex[33];
	void *map;

	s->fd = -1;
	s->t = NULL;
	s->slot = -1;
	pthread_mutex_init(&s->mu, NULL);
	for (int i = 0; i < len; i++)
		snprintf(hex + 2 * i, 3, "%02x", ip[i]);
	snprintf(s->path, sizeof(s->path), "/dev/shm/softrnic-steer4791v2-%u-%llx-%s",
		 (unsigned int)geteuid(), ns, hex);
	fd = open(s->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	while (flock(fd, LOCK_EX) < 0 && errno == EINTR)
		;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		e = EPERM;
		goto fail;
	}
	if (st.st_size == 0) {
		struct net_steer_table init = { .magic = STEER_MAGIC, .census = 1 };

		if (getrandom(&init.secret, sizeof(init.secret), 0) != sizeof(init.secret) ||
		    pwrite(fd, &init, sizeof(init), 0) != (ssize_t)sizeof(init)) {
			e = EIO;
			goto fail;
		}
	} else if ((size_t)st.st_size != sizeof(struct net_steer_table)) {
		e = EINVAL; /* another layout: leave it alone */
		goto fail;
	}
	map = mmap(NULL, sizeof(struct net_steer_table), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		e = errno;
		goto fail;
	}
	flock(fd, LOCK_UN);
	s->t = map;
	if (s->t->magic != STEER_MAGIC) {
		munmap(map, sizeof(struct net_steer_table));
		close(fd);
		s->t = NULL;
		return -EINVAL;
	}
	s->fd = fd;
	return 0;
fail:
	flock(fd, LOCK_UN);
	close(fd);
	return -e;
}

void net_steer_close(struct net_steer *s)
{
	if (s->fd < 0)
		return;
	net_steer_leave(s);
	munmap(s->t, sizeof(struct net_steer_table));
	close(s->fd);
	s->fd = -1;
	s->t = NULL;
	pthread_mutex_destroy(&s->mu);
}

int net_steer_join(struct net_steer *s, uint16_t port)
{
	uint64_t me = net_proc_word(getpid());
	int ret = -ENOSPC;

	if (s->fd < 0)
		return -EBADF;
	if (s->slot >= 0)
		return 0;
	net_steer_lock(s);
	for (int i = 0; i < NET_STEER_MEMBERS; i++) {
		struct steer_member *m = &s->t->m[i];
		uint64_t w = atomic_load(&m->owner);

		if (w && net_proc_word_alive(w))
			continue;
		m->port = port;
		m->prog_idx = NO_IDX;
		m->ahead_lo = m->ahead_hi = 0;
		atomic_store(&m->claim, 0);
		atomic_store(&m->owner, me);
		s->slot = i;
		ret = 0;
		break;
	}
	net_steer_unlock(s);
	return ret;
}

void net_steer_leave(struct net_steer *s)
{
	if (s->fd < 0 || s->slot < 0)
		return;
	net_steer_lock(s);
	atomic_store(&s->t->m[s->slot].owner, 0);
	net_steer_unlock(s);
	s->slot = -1;
}

void net_steer_reserve(struct net_steer *s, uint32_t lo, uint32_t hi)
{
	if (s->fd < 0 || s->slot < 0)
		return;
	net_steer_lock(s);
	s->t->m[s->slot].ahead_lo = lo;
	s->t->m[s->slot].ahead_hi = hi;
	net_steer_unlock(s);
}

int net_steer_census_begin(struct net_steer *s, uint8_t probes[][NET_STEER_PROBE_LEN])
{
	uint32_t census, n = 0;

	if (s->fd < 0)
		return 0;
	net_steer_lock(s);
	for (int i = 0; i < NET_STEER_MEMBERS; i++) {
		struct steer_member *m = &s->t->m[i];
		uint64_t w = atomic_load(&m->owner);

		if (w && !net_proc_word_alive(w))
			atomic_store(&m->owner, 0), w = 0;
		n += w != 0;
	}
	census = (atomic_load(&s->t->census) + 1) & 0xffffff;
	if (!census)
		census = 1;
	s->t->n = n;
	atomic_store(&s->t->census, census);
	for (uint32_t i = 0; i < n; i++) {
		put_be32(probes[i], NET_STEER_PROBE_MAGIC);
		put_be32(probes[i] + 4, census);
		put_be32(probes[i] + 8, i);
		put_be32(probes[i] + 12, s->t->secret);
	}
	net_steer_unlock(s);
	return (int)n;
}

/* Index of each live member in census c, or false if some live member
 * has no claim in it, or two claim one index. */
static bool census_complete(const struct net_steer_table *t, uint32_t c, uint8_t idx[NET_STEER_MEMBERS])
{
	uint64_t taken = 0;
	uint32_t n = 0;

	for (int i = 0; i < NET_STEER_MEMBERS; i++) {
		uint64_t w = atomic_load(&t->m[i].owner);
		uint32_t claim = atomic_load(&t->m[i].claim);

		idx[i] = NO_IDX;
		if (!w)
			continue;
		if (claim >> 8 != c || (claim & 0xff) >= NET_STEER_MEMBERS ||
		    (taken >> (claim & 0xff) & 1))
			return false;
		taken |= 1ull << (claim & 0xff);
		idx[i] = (uint8_t)(claim & 0xff);
		n++;
	}
	return n > 0 && n == t->n;
}

bool net_steer_probe_in(struct net_steer *s, const uint8_t *buf, uint32_t len, bool *complete)
{
	uint8_t idx[NET_STEER_MEMBERS];
	uint32_t c, i;

	*complete = false;
	if (len < 4 || get_be32(buf) != NET_STEER_PROBE_MAGIC)
		return false;
	if (len != NET_STEER_PROBE_LEN || s->fd < 0 || s->slot < 0)
		return true;
	c = get_be32(buf + 4);
	i = get_be32(buf + 8);
	if (get_be32(buf + 12) != s->t->secret || c != atomic_load(&s->t->census) ||
	    i >= NET_STEER_MEMBERS)
		return true;
	atomic_store(&s->t->m[s->slot].claim, c << 8 | i);
	*complete = census_complete(s->t, c, idx);
	return true;
}

int net_steer_spans(struct net_steer *s, int (*owner)(void *arg, uint32_t qpn, uint16_t *port),
		    void *arg, uint32_t qpn_limit, struct net_steer_span *out, int max, bool *stale)
{
	uint8_t idx[NET_STEER_MEMBERS], *map;
	int n = 0;

	*stale = false;
	if (s->fd < 0)
		return -EBADF;
	if (census_complete(s->t, atomic_load(&s->t->census), idx)) {
		for (int i = 0; i < NET_STEER_MEMBERS; i++)
			s->t->m[i].prog_idx = idx[i];
	} else {
		/* the indexes the group had when last known; a member
		 * without one is not steered to until a census completes */
		for (int i = 0; i < NET_STEER_MEMBERS; i++) {
			idx[i] = atomic_load(&s->t->m[i].owner) ? s->t->m[i].prog_idx : NO_IDX;
			*stale |= atomic_load(&s->t->m[i].owner) && idx[i] == NO_IDX;
		}
	}
	map = malloc(qpn_limit);
	if (!map)
		return -ENOMEM;
	memset(map, NO_IDX, qpn_limit);
	/* what members will allocate next, then what they own */
	for (int i = 0; i < NET_STEER_MEMBERS; i++) {
		const struct steer_member *m = &s->t->m[i];

		if (idx[i] == NO_IDX)
			continue;
		for (uint32_t q = m->ahead_lo; q && q <= m->ahead_hi && q < qpn_limit; q++)
			map[q] = idx[i];
	}
	for (uint32_t q = 0; q < qpn_limit; q++) {
		uint16_t port = 0;
		int pid = owner(arg, q, &port);

		if (!pid)
			continue;
		/* (a dead process's slot names a port a live engine may
		 * have now: the pid tells them apart) */
		map[q] = NO_IDX;
		for (int i = 0; i < NET_STEER_MEMBERS; i++)
			if (idx[i] != NO_IDX && s->t->m[i].port == port &&
			    (int)(atomic_load(&s->t->m[i].owner) >> 32) == pid) {
				map[q] = idx[i];
				break;
			}
	}
	for (uint32_t q = 0; q < qpn_limit && n < max; q++) {
		if (map[q] == NO_IDX)
			continue;
		if (n > 0 && out[n - 1].hi + 1 == q && out[n - 1].idx == map[q])
			out[n - 1].hi = q;
		else
			out[n++] = (struct net_steer_span){ q, q, map[q] };
	}
	free(map);
	return n;
}

int net_steer_attach(int sock_fd, const struct net_steer_span *spans, int n)
{
	struct sock_filter *prog = malloc(sizeof(*prog) * NET_STEER_PROG_LEN(n));
	struct sock_fprog fp;
	int len, ret = 0;

	if (!prog)
		return -ENOMEM;
	len = net_steer_prog_build(spans, n, prog);
	if (len < 0) {
		free(prog);
		return len;
	}
	memset(&fp, 0, sizeof(fp)); /* (its padding goes to the kernel too) */
	fp.len = (unsigned short)len;
	fp.filter = prog;
	if (setsockopt(sock_fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &fp, sizeof(fp)) < 0)
		ret = -errno;
	free(prog);
	return ret;
}
