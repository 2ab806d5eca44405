/* net/steer_prog: compile QPN spans into a reuseport program (see
 * steer_prog.h). */
#include "net/steer_prog.h"

#include <errno.h>

/* The whole QPN space cut into pieces, each going to one index (or to
 * NET_STEER_ANY): the tree's leaves. */
struct piece {
	uint32_t start;
	uint32_t idx;
};

struct emit {
	struct sock_filter *out;
	int n;
};

static void put(struct emit *e, uint16_t code, uint8_t jt, uint8_t jf, uint32_t k)
{
	e->out[e->n++] = (struct sock_filter){ code, jt, jf, k };
}

/* Pieces a..b-1: a compare on the middle piece's start, then the lower
 * half, then the upper half.  The compare skips a jump that passes the
 * lower half: the jump has 32 bits of offset where a compare has 8. */
static void tree(struct emit *e, const struct piece *p, int a, int b)
{
	int mid, ja;

	if (b - a == 1) {
		put(e, BPF_RET | BPF_K, 0, 0, p[a].idx);
		return;
	}
	mid = a + (b - a) / 2;
	put(e, BPF_JMP | BPF_JGE | BPF_K, 0, 1, p[mid].start);
	ja = e->n;
	put(e, BPF_JMP | BPF_JA, 0, 0, 0);
	tree(e, p, a, mid);
	e->out[ja].k = (uint32_t)(e->n - ja - 1);
	tree(e, p, mid, b);
}

int net_steer_prog_build(const struct net_steer_span *spans, int n, struct sock_filter *out)
{
	struct piece p[2 * NET_STEER_MAX_SPANS + 1];
	struct emit e = { out, 0 };
	int m = 0;
	uint32_t next = 0; /* first QPN no piece covers yet */

	if (n < 0 || n > NET_STEER_MAX_SPANS)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		if (spans[i].lo > spans[i].hi || spans[i].hi > 0xffffff ||
		    (i > 0 && spans[i].lo <= spans[i - 1].hi))
			return -EINVAL;
		if (spans[i].lo > next)
			p[m++] = (struct piece){ next, NET_STEER_ANY };
		if (m > 0 && p[m - 1].idx == spans[i].idx)
			; /* adjoins a piece going to the same socket: one piece */
		else
			p[m++] = (struct piece){ spans[i].lo, spans[i].idx };
		next = spans[i].hi + 1;
	}
	if (next <= 0xffffff || m == 0)
		p[m++] = (struct piece){ next, NET_STEER_ANY };

	/* shorter than a BTH with a QPN: not ours to place */
	put(&e, BPF_LD | BPF_W | BPF_LEN, 0, 0, 0);
	put(&e, BPF_JMP | BPF_JGE | BPF_K, 1, 0, 12);
	put(&e, BPF_RET | BPF_K, 0, 0, NET_STEER_ANY);
	/* a census probe: its third word is the index it asks for */
	put(&e, BPF_LD | BPF_W | BPF_ABS, 0, 0, 0);
	put(&e, BPF_JMP | BPF_JEQ | BPF_K, 0, 2, NET_STEER_PROBE_MAGIC);
	put(&e, BPF_LD | BPF_W | BPF_ABS, 0, 0, 8);
	put(&e, BPF_RET | BPF_A, 0, 0, 0);
	/* the BTH's destination QPN: the low 24 bits of its second word */
	put(&e, BPF_LD | BPF_W | BPF_ABS, 0, 0, 4);
	put(&e, BPF_ALU | BPF_AND | BPF_K, 0, 0, 0xffffff);
	tree(&e, p, 0, m);
	return e.n;
}

static uint32_t load_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

uint32_t net_steer_prog_run(const struct sock_filter *prog, int len, const uint8_t *pkt,
			    uint32_t pkt_len)
{
	uint32_t a = 0;

	for (int pc = 0; pc >= 0 && pc < len; pc++) {
		const struct sock_filter *f = &prog[pc];

		switch (f->code) {
		case BPF_LD | BPF_W | BPF_LEN:
			a = pkt_len;
			break;
		case BPF_LD | BPF_W | BPF_ABS:
			if (f->k > pkt_len || pkt_len - f->k < 4)
				return 0; /* as the kernel: a load past the end ends it */
			a = load_be32(pkt + f->k);
			break;
		case BPF_ALU | BPF_AND | BPF_K:
			a &= f->k;
			break;
		case BPF_JMP | BPF_JA:
			pc += (int)f->k;
			break;
		case BPF_JMP | BPF_JGE | BPF_K:
			pc += a >= f->k ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JEQ | BPF_K:
			pc += a == f->k ? f->jt : f->jf;
			break;
		case BPF_RET | BPF_K:
			return f->k;
		case BPF_RET | BPF_A:
			return a;
		default:
			return 0;
		}
	}
	return 0;
}
