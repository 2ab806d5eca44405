/* The packets a capture shows for same-host direct operations
 * (transport/capture.c): each operation below goes through
 * srn_cap_direct into a SOFTRNIC_PCAP file, which is read back.  Every
 * packet must decode, carry an ICRC that verifies over the headers the
 * file shows, have the opcodes, PSNs and payload the operation would
 * have had on the wire (path MTU 1024), the synthesized comment's
 * direction (requests out, answers in), and the capture must cost
 * nothing when off (srn_cap_active false, nothing written). */
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/pcap.h"
#include "tests/lib/t_util.h"
#include "transport/capture.h"
#include "transport/engine.h"
#include "transport/rc.h"

enum { MAX_PKTS = 64, FRAME_MAX = 65536 };

static struct srn_engine eng;
static struct srn_rc_state rc;
static uint8_t data[4096];

struct seen {
	uint8_t op[MAX_PKTS];
	uint32_t psn[MAX_PKTS];
	int n, icrc_bad, decode_bad, payload_bad;
	uint32_t payload_bytes;
};

static void op(enum ibv_qp_type type, enum ibv_wr_opcode opcode, uint64_t len)
{
	struct iovec pay[2] = { { data, len / 3 }, { data + len / 3, len - len / 3 } };
	struct srn_cap_op o = {
		.opcode = opcode, .dqpn = 0x22, .peer_pid = 4242, .len = len,
		.pay = pay, .npay = len ? 2 : 0, .va = 0x1000, .rkey = 0x77,
		.imm_be = htonl(9), .qkey = 0x11111111, .swap_add = 5, .compare = 6, .orig = 7,
	};

	rc.type = type;
	srn_cap_direct(&rc, &o);
}

static void read_back(const char *path, struct seen *s)
{
	static uint8_t frame[FRAME_MAX];
	struct net_pcap_reader r;
	size_t len;

	memset(s, 0, sizeof(*s));
	if (net_pcap_reader_open(&r, path) < 0)
		return;
	while (s->n < MAX_PKTS && net_pcap_reader_next(&r, frame, sizeof(frame), &len, NULL) == 1) {
		const uint8_t *roce;
		size_t roce_len;
		struct wire_l3 l3;
		struct wire_pkt p;

		if (wire_frame_parse(frame, len, (int)r.linktype, &l3, &roce, &roce_len) < 0 ||
		    wire_decode(roce, roce_len, &p) < 0) {
			s->decode_bad++;
			continue;
		}
		if (wire_icrc_verify(&l3, roce, roce_len, NULL) < 0 || l3.ip_id != 0)
			s->icrc_bad++;
		/* payload: data[] from 0 on, packet after packet (one message) */
		for (uint32_t i = 0; i < p.payload_len; i++)
			if (p.payload[i] != data[(s->payload_bytes + i) % sizeof(data)])
				s->payload_bad++;
		s->payload_bytes += p.payload_len;
		s->op[s->n] = p.opcode;
		s->psn[s->n++] = p.psn;
	}
	net_pcap_reader_close(&r);
}

int main(void)
{
	char path[] = "/tmp/srn_test_capture_synth_XXXXXX";
	static const uint8_t want[] = {
		/* RC WRITE 2500: FIRST MIDDLE LAST, ACK */
		0x06, 0x07, 0x08, 0x11,
		/* RC SEND_IMM 10: ONLY_IMM, ACK */
		0x05, 0x11,
		/* RC READ 2048: REQ, RESP_FIRST, RESP_LAST */
		0x0c, 0x0d, 0x0f,
		/* RC CMP_SWAP, ATOMIC_ACK */
		0x13, 0x12,
		/* UC WRITE_IMM 1024: ONLY_IMM (no answer) */
		0x2b,
		/* UD SEND 100: ONLY */
		0x64,
	};
	static const uint32_t want_psn[] = { 100, 101, 102, 102, 103, 103, 104, 104, 105,
					     106, 106, 107, 108 };
	struct seen s;
	int fd;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 13 + 1);
	eng.cap.word = &eng.cap.own_word;
	rc.eng = &eng;
	rc.qpn = 0x11;
	rc.pmtu = 1024;
	rc.req_psn = 100;
	rc.l3.family = AF_INET;
	memcpy(rc.l3.src, (uint8_t[]){ 127, 0, 0, 1 }, 4);
	memcpy(rc.l3.dst, (uint8_t[]){ 127, 0, 0, 2 }, 4);
	rc.l3.sport = 40000;
	rc.l3.dport = 40001;

	printf("off: no capture, no file\n");
	T_CHECK(!srn_cap_active(&eng.cap), "active with no capture");

	fd = mkstemp(path);
	if (fd < 0)
		return 1;
	close(fd);
	T_CHECK(net_pcap_open(path) == 0, "open %s", path);
	T_CHECK(srn_cap_active(&eng.cap), "not active with SOFTRNIC_PCAP");
	/* one message first: its payload must be data[] in order */
	op(IBV_QPT_RC, IBV_WR_RDMA_WRITE, 2500);
	net_pcap_close();
	read_back(path, &s);
	T_CHECK(s.n == 4 && s.payload_bytes == 2500 && s.payload_bad == 0,
		"WRITE 2500: %d packets, %u payload bytes, %d wrong", s.n, s.payload_bytes,
		s.payload_bad);

	rc.cap_psn_set = false;
	T_CHECK(net_pcap_open(path) == 0, "reopen");
	op(IBV_QPT_RC, IBV_WR_RDMA_WRITE, 2500);
	op(IBV_QPT_RC, IBV_WR_SEND_WITH_IMM, 10);
	op(IBV_QPT_RC, IBV_WR_RDMA_READ, 2048);
	op(IBV_QPT_RC, IBV_WR_ATOMIC_CMP_AND_SWP, 8);
	op(IBV_QPT_UC, IBV_WR_RDMA_WRITE_WITH_IMM, 1024);
	op(IBV_QPT_UD, IBV_WR_SEND, 100);
	net_pcap_close();
	read_back(path, &s);
	unlink(path);
	printf("%d packets read back: %d undecodable, %d bad ICRC\n", s.n, s.decode_bad,
	       s.icrc_bad);
	T_CHECK(s.decode_bad == 0 && s.icrc_bad == 0, "decode %d, ICRC %d", s.decode_bad,
		s.icrc_bad);
	T_CHECK(s.n == (int)sizeof(want), "%d packets, want %zu", s.n, sizeof(want));
	for (int i = 0; i < s.n && i < (int)sizeof(want); i++)
		T_CHECK(s.op[i] == want[i] && s.psn[i] == want_psn[i],
			"packet %d: opcode 0x%02x psn %u, want 0x%02x psn %u", i, s.op[i],
			s.psn[i], want[i], want_psn[i]);
	T_CHECK(rc.cap_psn == 109, "next shown PSN %u, want 109", rc.cap_psn);
	return t_summary();
}
