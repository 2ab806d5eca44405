/* SOFTRNIC_PCAP with both QPs in one process: WRITEs, SENDs, READs and
 * atomics between them, then tshark reads the pcapng.  Over UDP every
 * packet must be there once, as sent (outbound; the receiving QP's copy
 * is not written again); on the direct path, which sends nothing, as
 * the packets the operations stand for: requests outbound, answers
 * inbound, every one with the "synthesized" comment.  Data packet counts
 * are exact on both paths. */
#include "t_rc.h"

enum { NWRITE = 4, WRITE_LEN = 3000, NSEND = 4, SEND_LEN = 2048, NREAD = 2, READ_LEN = 4096,
       NATOMIC = 2, MAX_LINES = 100000 };

struct tally {
	int op[256];
	int out, in, synth, lines;
};

static void run(struct t_end *a, struct t_end *b)
{
	struct ibv_wc wc;
	int id = 1;

	for (int i = 0; i < NSEND; i++)
		CHECK(post_recv(b, 65536 + (uint64_t)i * SEND_LEN, SEND_LEN, 500 + i) == 0, "recv");
	for (int i = 0; i < NWRITE; i++) {
		CHECK(post_send(a, IBV_WR_RDMA_WRITE, 0, WRITE_LEN, (uintptr_t)b->buf, b->mr->rkey, 0,
				id++) == 0, "post write");
		CHECK(t_wait(a->cq, &wc) == 0 && wc.status == IBV_WC_SUCCESS, "write done");
	}
	for (int i = 0; i < NSEND; i++) {
		CHECK(post_send(a, IBV_WR_SEND, 0, SEND_LEN, 0, 0, 0, id++) == 0, "post send");
		CHECK(t_wait(a->cq, &wc) == 0 && wc.status == IBV_WC_SUCCESS, "send done");
		CHECK(t_wait(b->cq, &wc) == 0 && wc.status == IBV_WC_SUCCESS, "receive done");
	}
	for (int i = 0; i < NREAD; i++) {
		CHECK(post_send(a, IBV_WR_RDMA_READ, 8192, READ_LEN, (uintptr_t)b->buf, b->mr->rkey,
				0, id++) == 0, "post read");
		CHECK(t_wait(a->cq, &wc) == 0 && wc.status == IBV_WC_SUCCESS, "read done");
	}
	for (int i = 0; i < NATOMIC; i++) {
		CHECK(post_send(a, IBV_WR_ATOMIC_FETCH_AND_ADD, 16384, 8,
				(uintptr_t)b->buf + 32768, b->mr->rkey, 0, id++) == 0, "post atomic");
		CHECK(t_wait(a->cq, &wc) == 0 && wc.status == IBV_WC_SUCCESS, "atomic done");
	}
}

static int read_back(const char *path, struct tally *t)
{
	char cmd[512], line[512];
	FILE *p;

	snprintf(cmd, sizeof(cmd),
		 "tshark -r %s -d udp.port==4791,infiniband -Y infiniband -T fields "
		 "-E separator=';' -e frame.packet_flags_direction -e infiniband.bth.opcode "
		 "-e frame.comment 2>/dev/null", path);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	memset(t, 0, sizeof(*t));
	while (t->lines < MAX_LINES && fgets(line, sizeof(line), p)) {
		unsigned long dir = 0;
		int op = -1;

		if (sscanf(line, "%lx;%d", &dir, &op) != 2 || op < 0 || op > 255)
			continue;
		t->lines++;
		t->op[op]++;
		t->out += dir == 2;
		t->in += dir == 1;
		t->synth += strstr(line, "synthesized") != NULL;
	}
	return pclose(p);
}

int main(void)
{
	const char *mode = getenv("SOFTRNIC_TRANSPORT");
	bool udp = mode && !strcmp(mode, "udp");
	char path[] = "/tmp/srn_pcap_self_XXXXXX";
	struct t_end a, b;
	struct tally t;
	int fd, answers;

	if (system("tshark -v >/dev/null 2>&1") != 0) {
		printf("SKIP: tshark is not installed\n");
		return 77;
	}
	fd = mkstemp(path);
	if (fd < 0)
		return 1;
	close(fd);
	setenv("SOFTRNIC_PCAP", path, 1);
	t_pair(&a, &b, 14, 7, 7);
	run(&a, &b);
	t_end_fini(&a);
	t_end_fini(&b);
	CHECK(read_back(path, &t) == 0, "tshark failed");
	unlink(path);
	printf("%s path: %d packets, %d outbound, %d inbound, %d synthesized\n",
	       udp ? "udp" : "default", t.lines, t.out, t.in, t.synth);
	printf("  WRITE first/middle/last %d/%d/%d, SEND first/last %d/%d, READ req %d "
	       "resp %d/%d/%d, FETCH_ADD %d, ATOMIC_ACK %d, ACK %d\n",
	       t.op[6], t.op[7], t.op[8], t.op[0], t.op[2], t.op[12], t.op[13], t.op[14], t.op[15],
	       t.op[20], t.op[18], t.op[17]);
	/* 3000 B at MTU 1024: 3 packets; 2048: 2; 4096 read: 4 responses */
	CHECK(t.op[6] == NWRITE && t.op[7] == NWRITE && t.op[8] == NWRITE, "WRITE packets");
	CHECK(t.op[0] == NSEND && t.op[2] == NSEND && t.op[1] == 0, "SEND packets");
	CHECK(t.op[12] == NREAD && t.op[13] == NREAD && t.op[14] == 2 * NREAD &&
	      t.op[15] == NREAD, "READ packets");
	CHECK(t.op[20] == NATOMIC && t.op[18] == NATOMIC, "atomic packets");
	answers = t.op[13] + t.op[14] + t.op[15] + t.op[18] + t.op[17];
	if (udp) {
		/* each once, as sent: every packet has a sender here */
		CHECK(t.in == 0 && t.out == t.lines, "%d packets inbound (written twice)", t.in);
		CHECK(t.synth == 0, "%d synthesized on udp", t.synth);
		CHECK(t.op[17] >= 1, "no ACK");
	} else {
		CHECK(t.synth == t.lines, "%d of %d synthesized", t.synth, t.lines);
		CHECK(t.op[17] == NWRITE + NSEND, "%d ACKs, want one per message", t.op[17]);
		CHECK(t.in == answers && t.out == t.lines - answers,
		      "directions: %d in, %d out (answers %d)", t.in, t.out, answers);
	}
	if (failures)
		printf("%d failures\n", failures);
	return failures ? 1 : 0;
}
