/* The codec against real packets: every RoCEv2 packet that Linux rxe sent
 * in the captures in tests/vectors/ must decode, re-encode byte for byte, and carry
 * the ICRC we compute; the ICRC check must recover the IPv4 ID that a UDP
 * socket would have hidden from us.  Packet and opcode counts must match
 * vectors/README.md. */
#include <sys/socket.h>

#include "t_wire_vectors.h"
#include "tests/lib/t_util.h"

struct file_stats {
	unsigned by_opcode[256];
	unsigned ipv4, ipv6, id_nonzero, bad_rejected;
};

static void check_packet(const struct t_vec_pkt *p, void *arg)
{
	struct file_stats *st = arg;
	uint8_t rebuilt[T_FRAME_MAX], hdrs[WIRE_MAX_HDR_LEN];
	struct wire_l3 guess;
	struct wire_pkt pkt;
	struct iovec iov[3];
	uint16_t id = 0xbeef;
	size_t n, pad;
	uint32_t icrc;
	int hlen, rc;

	rc = wire_decode(p->roce, p->roce_len, &pkt);
	T_CHECK(rc == 0, "%s #%u: decode returned %d", p->file, p->index, rc);
	if (rc)
		return;
	st->by_opcode[pkt.opcode]++;
	if (p->l3.family == AF_INET)
		st->ipv4++;
	else
		st->ipv6++;

	/* Headers: re-encoded from the decoded struct, byte for byte. */
	hlen = wire_encode_hdrs(hdrs, &pkt);
	T_CHECK(hlen == wire_opcodes[pkt.opcode].hdr_len, "%s #%u: encode returned %d", p->file,
		p->index, hlen);
	if (hlen < 0)
		return;
	T_CHECK(!memcmp(hdrs, p->roce, (size_t)hlen), "%s #%u: %s: headers differ", p->file,
		p->index, wire_opcodes[pkt.opcode].name);
	T_CHECK(pkt.payload == p->roce + hlen, "%s #%u: payload pointer", p->file, p->index);
	T_CHECK(pkt.padcnt == wire_padcnt(pkt.payload_len), "%s #%u: padcnt %u for %u bytes",
		p->file, p->index, pkt.padcnt, pkt.payload_len);

	/* Whole packet rebuilt: headers + payload + zero pad + our ICRC. */
	n = (size_t)hlen;
	memcpy(rebuilt, hdrs, n);
	memcpy(rebuilt + n, pkt.payload, pkt.payload_len);
	n += pkt.payload_len;
	pad = pkt.padcnt;
	memset(rebuilt + n, 0, pad);
	n += pad;
	/* Split the iovec inside the BTH and again later, to exercise the
	 * gather path. */
	iov[0] = (struct iovec){ rebuilt, 3 };
	iov[1] = (struct iovec){ rebuilt + 3, hlen - 3 };
	iov[2] = (struct iovec){ rebuilt + hlen, n - (size_t)hlen };
	icrc = wire_icrc(&p->l3, iov, 3);
	T_CHECK(icrc == pkt.icrc, "%s #%u: ICRC %08x, captured %08x", p->file, p->index, icrc,
		pkt.icrc);
	for (int i = 0; i < 4; i++)
		rebuilt[n + i] = (uint8_t)(icrc >> (8 * i));
	n += 4;
	T_CHECK(n == p->roce_len && !memcmp(rebuilt, p->roce, n),
		"%s #%u: rebuilt packet differs (%zu vs %zu bytes)", p->file, p->index, n,
		p->roce_len);

	/* The receiver guesses ID 0 and must find the real one. */
	guess = p->l3;
	guess.ip_id = 0;
	rc = wire_icrc_verify(&guess, p->roce, p->roce_len, &id);
	T_CHECK(rc == 0 && id == p->l3.ip_id, "%s #%u: verify rc %d id %u, real %u", p->file,
		p->index, rc, id, p->l3.ip_id);
	if (p->l3.ip_id)
		st->id_nonzero++;

	/* A flipped payload (or header) bit must not be explained by an ID. */
	memcpy(rebuilt, p->roce, p->roce_len);
	rebuilt[p->roce_len / 2] ^= 0x10;
	rc = wire_icrc_verify(&guess, rebuilt, p->roce_len, &id);
	T_CHECK(rc == -EBADMSG, "%s #%u: corrupted packet accepted (rc %d)", p->file, p->index, rc);
	if (rc == -EBADMSG)
		st->bad_rejected++;
}

/* README line "NAME.pcap ...: N RoCEv2 packets, ...; opcodes: OP xK, ..." */
static int readme_expect(const char *file, unsigned *count, char *opcodes, size_t cap)
{
	char path[4352], line[4096];
	FILE *f;
	int found = 0;

	snprintf(path, sizeof(path), "%s/README.md", t_vectors_dir());
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		size_t fl = strlen(file);
		char *q, *ops;

		if (strncmp(line, file, fl) || (line[fl] != ':' && line[fl] != ' '))
			continue;
		q = strstr(line, " RoCEv2 packets");
		if (!q)
			continue;
		while (q > line && q[-1] >= '0' && q[-1] <= '9')
			q--;
		*count = (unsigned)strtoul(q, NULL, 10);
		ops = strstr(line, "opcodes: ");
		snprintf(opcodes, cap, "%s", ops ? ops + 9 : "");
		opcodes[strcspn(opcodes, "\n")] = 0;
		found = 1;
	}
	fclose(f);
	return found;
}

/* Compare our opcode histogram with "RC SEND_FIRST x10, RC ACK x5". */
static int opcodes_match(const char *file, const char *list, const unsigned *by_opcode)
{
	unsigned listed = 0, total = 0;
	char buf[4096], *save = NULL;
	int ok = 1;

	snprintf(buf, sizeof(buf), "%s", list);
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *x = strrchr(tok, 'x');
		unsigned want, got = 0;
		int op;

		while (*tok == ' ')
			tok++;
		if (!x || x == tok)
			continue;
		want = (unsigned)strtoul(x + 1, NULL, 10);
		x[-1] = 0;
		for (op = 0; op < 256; op++)
			if (wire_opcodes[op].name && !strcmp(wire_opcodes[op].name, tok))
				break;
		if (op < 256)
			got = by_opcode[op];
		if (got != want) {
			printf("  %s: %s x%u, README says x%u\n", file, tok, got, want);
			ok = 0;
		}
		listed += want;
	}
	for (int op = 0; op < 256; op++)
		total += by_opcode[op];
	if (total != listed) {
		printf("  %s: %u packets, README opcodes sum to %u\n", file, total, listed);
		ok = 0;
	}
	return ok;
}

int main(void)
{
	char *files[T_MAX_FILES], opcodes[4096];
	unsigned total = 0, readme_total = 0, rejected = 0, nz = 0;
	int nfiles = t_vector_files(files);

	if (nfiles <= 0)
		t_bail("no vectors in %s (set SRN_SOURCE)", t_vectors_dir());
	printf("checking decode, re-encode, ICRC and IPv4-ID recovery on %d captures\n",
	       nfiles);
	for (int i = 0; i < nfiles; i++) {
		static struct file_stats st;
		unsigned want = 0;
		int n, listed;

		memset(&st, 0, sizeof(st));
		n = t_vector_each(files[i], check_packet, &st);
		printf("  %-34s %4d RoCEv2 packets (IPv4 %u, IPv6 %u, non-zero IDs %u)\n",
		       files[i], n, st.ipv4, st.ipv6, st.id_nonzero);
		T_CHECK(n > 0, "%s: no RoCEv2 packets", files[i]);
		if (n <= 0)
			continue;
		listed = readme_expect(files[i], &want, opcodes, sizeof(opcodes));
		T_CHECK(listed, "%s: not listed in README.md", files[i]);
		if (listed) {
			T_CHECK(want == (unsigned)n, "%s: README says %u packets", files[i], want);
			T_CHECK(opcodes_match(files[i], opcodes, st.by_opcode),
				"%s: opcode counts differ from README.md (above)", files[i]);
		}
		total += (unsigned)n;
		readme_total += want;
		rejected += st.bad_rejected;
		nz += st.id_nonzero;
		free(files[i]);
	}
	printf("total %u RoCEv2 packets (README: %u); %u with a non-zero IPv4 ID "
	       "recovered from guess 0; %u corrupted copies rejected\n",
	       total, readme_total, nz, rejected);
	T_CHECK(total == readme_total, "total %u != README %u", total, readme_total);
	T_CHECK(nz != 0, "no packet exercised the ID solve");
	return t_summary();
}
