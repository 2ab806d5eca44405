/* tools/capture_merge: see capture_merge.h. */
#include "tools/capture_merge.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "net/pcapng.h"
#include "wire/wire.h"

enum { BUCKETS = 65536, ROCE_PORT = 4791 };

struct pend {
	struct net_cap_rec *r;          /* a copy, header and bytes */
	uint64_t key, seen_ns;
	uint32_t other_pid;             /* the partner's pid, 0: none yet */
	uint32_t other_qpn;             /* and its QP */
	uint32_t near_pid, near_qpn;    /* the peer_fn's answer on arrival */
	int64_t next;                   /* same bucket, older (-1: end) */
};

struct capture_merge {
	FILE *out;
	struct pend *q;                 /* FIFO by arrival: q[(head..tail) % cap] */
	int64_t head, tail, cap;
	int64_t bucket[BUCKETS];        /* newest entry's sequence, -1: none */
	struct capture_counts n;
	capture_peer_fn *peer_fn;
	void *peer_ctx;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* What both ends of one packet agree on: addresses, source port, bytes
 * (not the destination port: a receiver may be at 4791 or its own).
 * Of the bytes, the headers and the ICRC at the end, which already
 * digests all of them (same_packet compares the rest). */
static uint64_t rec_key(const struct net_cap_rec *r)
{
	const uint8_t *b = (const uint8_t *)(r + 1);
	uint64_t h = 0xcbf29ce484222325ull;
	uint32_t head = r->roce_len < 64 ? r->roce_len : 64;

	h = fnv(h, &r->family, 1);
	h = fnv(h, r->src, 16);
	h = fnv(h, r->dst, 16);
	h = fnv(h, &r->sport, 2);
	h = fnv(h, &r->roce_len, sizeof(r->roce_len));
	h = fnv(h, b, head);
	return r->roce_len > head ? fnv(h, b + r->roce_len - 4, 4) : h;
}

static int same_packet(const struct net_cap_rec *a, const struct net_cap_rec *b)
{
	return a->family == b->family && a->sport == b->sport && a->roce_len == b->roce_len &&
	       !memcmp(a->src, b->src, 16) && !memcmp(a->dst, b->dst, 16) &&
	       !memcmp(a + 1, b + 1, a->roce_len);
}

struct capture_merge *capture_merge_new(FILE *out)
{
	struct capture_merge *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->out = out;
	m->cap = 1024;
	m->q = calloc((size_t)m->cap, sizeof(*m->q));
	if (!m->q) {
		free(m);
		return NULL;
	}
	for (int i = 0; i < BUCKETS; i++)
		m->bucket[i] = -1;
	return m;
}

void capture_merge_set_peer_fn(struct capture_merge *m, capture_peer_fn *fn, void *ctx)
{
	m->peer_fn = fn;
	m->peer_ctx = ctx;
}

static struct pend *at(struct capture_merge *m, int64_t seq)
{
	return &m->q[seq % m->cap];
}

static int grow(struct capture_merge *m)
{
	struct pend *q = calloc((size_t)m->cap * 2, sizeof(*q));

	if (!q)
		return -ENOMEM;
	for (int64_t s = m->head; s < m->tail; s++)
		q[s % (m->cap * 2)] = *at(m, s);
	free(m->q);
	m->q = q;
	m->cap *= 2;
	return 0;
}

/* The pending send (want TX) or receive (RX) of the same packet with no
 * partner yet; or, any_tx, one that has one already. */
static struct pend *find(struct capture_merge *m, const struct net_cap_rec *r, uint64_t key,
			 unsigned int want, int any)
{
	for (int64_t s = m->bucket[key % BUCKETS]; s >= m->head; s = at(m, s)->next) {
		struct pend *p = at(m, s);

		if (p->key == key && p->r->kind == want && (any || !p->other_pid) &&
		    same_packet(p->r, r))
			return p;
	}
	return NULL;
}

int capture_merge_add(struct capture_merge *m, const struct net_cap_rec *r, uint64_t now_ns)
{
	uint64_t key = rec_key(r);
	struct pend *p;

	if (r->kind == NET_CAP_TX || r->kind == NET_CAP_RX) {
		unsigned int other = r->kind == NET_CAP_TX ? NET_CAP_RX : NET_CAP_TX;

		p = find(m, r, key, other, 0);
		if (p) {
			p->other_pid = r->pid ? r->pid : 1;
			p->other_qpn = r->qpn;
			m->n.paired++;
			return 0;
		}
		/* a second receiver of one sent packet (a multicast group) */
		if (r->kind == NET_CAP_RX && find(m, r, key, NET_CAP_TX, 1)) {
			m->n.extra_rx++;
			return 0;
		}
	}
	if (m->tail - m->head == m->cap && grow(m))
		return -ENOMEM;
	p = at(m, m->tail);
	p->r = malloc(r->len);
	if (!p->r)
		return -ENOMEM;
	memcpy(p->r, r, sizeof(*r) + r->roce_len);
	p->key = key;
	p->seen_ns = now_ns;
	p->other_pid = 0;
	p->other_qpn = 0;
	/* asked now: by the time it is written its QPs may be gone */
	if (!m->peer_fn || !m->peer_fn(m->peer_ctx, r, &p->near_pid, &p->near_qpn))
		p->near_pid = 0;
	p->next = m->bucket[key % BUCKETS];
	m->bucket[key % BUCKETS] = m->tail++;
	return 0;
}

static int write_one(struct capture_merge *m, const struct pend *p)
{
	const struct net_cap_rec *r = p->r;
	struct wire_l3 l3 = { .family = r->family, .ip_id = r->ip_id, .sport = r->sport,
			      .dport = ROCE_PORT, .ttl_hop = 64 };
	uint8_t hdr[WIRE_FRAME_HDR_MAX];
	struct iovec iov[2];
	char note[200];
	unsigned int dir = PCAPNG_DIR_OUT;

	memcpy(l3.src, r->src, 16);
	memcpy(l3.dst, r->dst, 16);
	iov[0].iov_base = hdr;
	iov[0].iov_len = wire_frame_build(hdr, &l3, r->roce_len);
	iov[1].iov_base = (void *)(r + 1);
	iov[1].iov_len = r->roce_len;
	if (!iov[0].iov_len)
		return 0;
	switch (r->kind) {
	case NET_CAP_DIRECT:
		if (r->flags & NET_CAP_F_ANSWER)
			snprintf(note, sizeof(note), "softrnic: pid %u -> pid %u qp %u %s",
				 r->pid, r->peer_pid, r->qpn, CAPTURE_SYNTH_NOTE);
		else
			snprintf(note, sizeof(note), "softrnic: pid %u qp %u -> pid %u %s",
				 r->pid, r->qpn, r->peer_pid, CAPTURE_SYNTH_NOTE);
		m->n.direct++;
		break;
	case NET_CAP_TX:
		if (p->other_pid) {
			snprintf(note, sizeof(note), "softrnic: pid %u qp %u -> pid %u qp %u",
				 r->pid, r->qpn, p->other_pid, p->other_qpn);
		} else if (p->near_pid) {
			snprintf(note, sizeof(note),
				 "softrnic: pid %u qp %u -> pid %u qp %u %s", r->pid, r->qpn,
				 p->near_pid, p->near_qpn, CAPTURE_NO_RX_NOTE);
			m->n.half_missing++;
		} else {
			snprintf(note, sizeof(note),
				 "softrnic: pid %u qp %u -> (no receiver on this device)", r->pid,
				 r->qpn);
			m->n.sent_only++;
		}
		break;
	default:
		if (p->other_pid) {
			snprintf(note, sizeof(note), "softrnic: pid %u qp %u -> pid %u qp %u",
				 p->other_pid, p->other_qpn, r->pid, r->qpn);
		} else if (p->near_pid) {
			snprintf(note, sizeof(note),
				 "softrnic: pid %u qp %u -> pid %u qp %u %s", p->near_pid,
				 p->near_qpn, r->pid, r->qpn, CAPTURE_NO_TX_NOTE);
			m->n.half_missing++;
		} else {
			snprintf(note, sizeof(note),
				 "softrnic: (not sent by softrnic here) -> pid %u qp %u", r->pid,
				 r->qpn);
			dir = PCAPNG_DIR_IN;
			m->n.received_only++;
		}
	}
	m->n.written++;
	return pcapng_write_packet(m->out, r->ts_ns, dir, note, iov, 2);
}

int capture_merge_flush(struct capture_merge *m, uint64_t now_ns, int all)
{
	int ret = 0;

	while (m->head < m->tail) {
		struct pend *p = at(m, m->head);
		int64_t *link;

		if (!all && now_ns - p->seen_ns < CAPTURE_WINDOW_NS)
			break;
		if (!ret)
			ret = write_one(m, p);
		/* out of its bucket: it is the oldest there, so the last */
		for (link = &m->bucket[p->key % BUCKETS]; *link >= 0 && *link != m->head;
		     link = &at(m, *link)->next)
			;
		if (*link == m->head)
			*link = -1;
		free(p->r);
		p->r = NULL;
		m->head++;
	}
	return ret;
}

const struct capture_counts *capture_merge_counts(const struct capture_merge *m)
{
	return &m->n;
}

void capture_merge_free(struct capture_merge *m)
{
	if (!m)
		return;
	for (int64_t s = m->head; s < m->tail; s++)
		free(at(m, s)->r);
	free(m->q);
	free(m);
}
