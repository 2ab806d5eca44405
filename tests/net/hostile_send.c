/* hostile_send DST_IP QPN SECONDS: from a plain UDP socket, send
 * DST_IP:4791 a rotating mix of hostile RoCEv2 datagrams for SECONDS, at
 * about 5000 a second, while a real transfer runs there
 * (tests/net/hostile_flow.sh):
 *   garbage      random bytes, random length (0-1400)
 *   truncated    a valid WRITE_ONLY cut short inside its headers
 *   bad_icrc     a WRITE_ONLY to QPN with a wrong ICRC
 *   write        valid ICRC, to QPN: random PSN, rkey and address
 *   opcode       valid ICRC, to QPN: a random opcode the codec encodes
 *   read_resp    valid ICRC, to QPN: a READ response nobody asked for
 *   send         valid ICRC, to QPN: a SEND_ONLY with a random PSN
 *   no_qp        valid ICRC WRITE_ONLY to a random QPN
 * Forged ACKs are left out: an ACK whose random PSN falls in the
 * requester's window would be honoured by any RoCE NIC (RoCE has no
 * authentication), which would make the transfer's check fail by chance.
 * Prints the count of each kind sent; exit 0, or 2 on a setup error. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "wire/wire.h"

enum { K_GARBAGE, K_TRUNC, K_BAD_ICRC, K_WRITE, K_OPCODE, K_READ_RESP, K_SEND, K_NO_QP, K_N };
static const char *const kind_name[K_N] = { "garbage", "truncated", "bad_icrc", "write",
					    "opcode",  "read_resp", "send",     "no_qp" };

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	/* xorshift64*: reproducible noise, not a secret */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int sock;
static struct wire_l3 l3;

/* h (+ plen payload bytes) with its ICRC (flipped when bad); the first
 * cut bytes only when cut > 0.  -1 if the codec refuses h. */
static int send_pkt(struct wire_pkt *h, uint32_t plen, int bad, size_t cut)
{
	uint8_t pkt[WIRE_MAX_HDR_LEN + 1024 + 8];
	struct iovec iov;
	uint32_t icrc;
	size_t len;
	int hl;

	h->padcnt = wire_padcnt(plen);
	h->pkey = 0xffff;
	hl = wire_encode_hdrs(pkt, h);
	if (hl < 0)
		return -1;
	for (uint32_t i = 0; i < plen; i++)
		pkt[hl + (int)i] = (uint8_t)rnd();
	len = (size_t)hl + plen;
	memset(pkt + len, 0, h->padcnt);
	len += h->padcnt;
	iov.iov_base = pkt;
	iov.iov_len = len;
	icrc = wire_icrc(&l3, &iov, 1) ^ (bad ? 0x01000000u : 0);
	for (int i = 0; i < 4; i++)
		pkt[len + (size_t)i] = (uint8_t)(icrc >> (8 * i));
	len += 4;
	if (cut && cut < len)
		len = cut;
	return send(sock, pkt, len, 0) < 0 ? -1 : 0;
}

static struct wire_pkt write_only(uint32_t qpn)
{
	struct wire_pkt h = { .opcode = WIRE_WRITE_ONLY, .dqpn = qpn,
			      .psn = (uint32_t)rnd() & WIRE_PSN_MASK, .va = rnd(),
			      .rkey = (uint32_t)rnd(), .dma_len = 64, .ackreq = true };
	return h;
}

int main(int argc, char **argv)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(4791) }, me;
	socklen_t ml = sizeof(me);
	unsigned long sent[K_N] = { 0 };
	uint32_t qpn;
	double secs, end;
	unsigned long i = 0;

	if (argc != 4 || inet_pton(AF_INET, argv[1], &to.sin_addr) != 1) {
		fprintf(stderr, "usage: hostile_send DST_IP QPN SECONDS\n");
		return 2;
	}
	qpn = (uint32_t)strtoul(argv[2], NULL, 0) & 0xffffff;
	secs = atof(argv[3]);
	sock = socket(AF_INET, SOCK_DGRAM, 0);
	if (sock < 0 || connect(sock, (struct sockaddr *)&to, sizeof(to)) ||
	    getsockname(sock, (struct sockaddr *)&me, &ml)) {
		perror("hostile_send: socket");
		return 2;
	}
	l3.family = AF_INET;
	memcpy(l3.src, &me.sin_addr, 4);
	memcpy(l3.dst, &to.sin_addr, 4);
	l3.sport = ntohs(me.sin_port);
	l3.dport = 4791;
	end = now_s() + secs;
	while (now_s() < end && i < 10000000) {
		int k = (int)(i++ % K_N), ok = 0;
		struct wire_pkt h = write_only(qpn);

		switch (k) {
		case K_GARBAGE: {
			uint8_t junk[1400];
			size_t n = (size_t)(rnd() % sizeof(junk));

			for (size_t j = 0; j < n; j++)
				junk[j] = (uint8_t)rnd();
			ok = send(sock, junk, n, 0) >= 0 ? 0 : -1;
			break;
		}
		case K_TRUNC:
			ok = send_pkt(&h, 64, 0, 1 + (size_t)(rnd() % (WIRE_BTH_LEN + WIRE_RETH_LEN)));
			break;
		case K_BAD_ICRC:
			ok = send_pkt(&h, 64, 1, 0);
			break;
		case K_WRITE:
			ok = send_pkt(&h, 64, 0, 0);
			break;
		case K_OPCODE:
			/* the codec refuses what it cannot encode: try others */
			for (int t = 0; t < 16; t++) {
				h.opcode = (uint8_t)rnd();
				if ((ok = send_pkt(&h, (uint32_t)(rnd() % 256), 0, 0)) == 0)
					break;
			}
			break;
		case K_READ_RESP:
			h.opcode = WIRE_READ_RESP_ONLY;
			h.msn = (uint32_t)rnd() & 0xffffff;
			ok = send_pkt(&h, 64, 0, 0);
			break;
		case K_SEND:
			h.opcode = WIRE_SEND_ONLY;
			ok = send_pkt(&h, 64, 0, 0);
			break;
		case K_NO_QP:
			h.dqpn = (uint32_t)rnd() & 0xffffff;
			ok = send_pkt(&h, 64, 0, 0);
			break;
		}
		if (ok == 0)
			sent[k]++;
		if (i % 16 == 0)
			usleep(3000); /* ~5000 datagrams a second */
	}
	for (int k = 0; k < K_N; k++)
		printf("%s%s %lu", k ? ", " : "", kind_name[k], sent[k]);
	printf("\n");
	return 0;
}
