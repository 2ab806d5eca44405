/* The pcap writer: packets from the vectors written through net_pcap_write
 * (from one thread, then from four at once) must read back as frames whose
 * RoCE bytes, addresses, ports and IPv4 ID are the originals and whose ICRC
 * still verifies; the file must be readable before it is closed (flushed
 * per packet); and, when tshark is installed, tshark must dissect every
 * packet as InfiniBand with our opcodes and PSNs and find nothing
 * malformed. */
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "t_wire_vectors.h"
#include "tests/lib/t_util.h"

enum { PER_FILE = 4, MAX_PKTS = 256, THREADS = 4, PER_THREAD = 50 };

struct sample {
	struct wire_l3 l3;
	uint8_t roce[T_FRAME_MAX / 8];
	size_t len;
};

static struct sample samples[MAX_PKTS];
static int nsamples;

/* Keep the first PER_FILE packets of each capture that fit. */
static void collect(const struct t_vec_pkt *v, void *arg)
{
	int *taken = arg;

	if (*taken >= PER_FILE || nsamples >= MAX_PKTS || v->roce_len > sizeof(samples[0].roce))
		return;
	samples[nsamples].l3 = v->l3;
	memcpy(samples[nsamples].roce, v->roce, v->roce_len);
	samples[nsamples].len = v->roce_len;
	nsamples++;
	(*taken)++;
}

static void write_sample(const struct sample *s)
{
	/* split after the BTH: the writer must gather iovecs */
	struct iovec iov[2] = { { (void *)s->roce, 12 },
				{ (void *)(s->roce + 12), s->len - 12 } };

	net_pcap_write(PCAPNG_DIR_OUT, &s->l3, iov, 2, NULL);
}

static int read_back_count(const char *path)
{
	static uint8_t frame[T_FRAME_MAX];
	struct net_pcap_reader r;
	size_t len;
	int n = 0;

	if (net_pcap_reader_open(&r, path) < 0)
		return -1;
	while (n < 100000 && net_pcap_reader_next(&r, frame, sizeof(frame), &len, NULL) == 1)
		n++;
	net_pcap_reader_close(&r);
	return n;
}

/* Each record must be one of the samples, byte for byte; returns how many
 * matched, in the order written (in_order) or in any order. */
static int check_file(const char *path, int in_order)
{
	static uint8_t frame[T_FRAME_MAX];
	struct net_pcap_reader r;
	const uint8_t *roce;
	struct wire_l3 l3;
	size_t len, rl;
	int n = 0, good = 0;

	if (net_pcap_reader_open(&r, path) < 0) {
		T_CHECK(0, "cannot reopen %s", path);
		return 0;
	}
	T_CHECK(r.linktype == 1, "linktype %u", r.linktype);
	while (n < 100000 && net_pcap_reader_next(&r, frame, sizeof(frame), &len, NULL) == 1) {
		const struct sample *s = &samples[in_order ? n % nsamples : 0];
		int rc = wire_frame_parse(frame, len, 1, &l3, &roce, &rl);
		uint16_t id = 0;

		n++;
		T_CHECK(rc == 0, "record %d: frame parse %d", n, rc);
		if (rc)
			continue;
		if (!in_order) /* find the sample by its content */
			for (int i = 0; i < nsamples; i++)
				if (samples[i].len == rl && !memcmp(samples[i].roce, roce, rl))
					s = &samples[i];
		if (s->len != rl || memcmp(s->roce, roce, rl) || l3.family != s->l3.family ||
		    memcmp(l3.src, s->l3.src, 16) || memcmp(l3.dst, s->l3.dst, 16) ||
		    l3.sport != s->l3.sport || l3.dport != s->l3.dport || l3.ip_id != s->l3.ip_id) {
			T_CHECK(0, "record %d differs from what was written", n);
			continue;
		}
		T_CHECK(wire_icrc_verify(&l3, roce, rl, &id) == 0 && id == s->l3.ip_id,
			"record %d: ICRC does not verify on the rebuilt headers", n);
		good++;
	}
	net_pcap_reader_close(&r);
	return good;
}

static void *writer_thread(void *arg)
{
	int t = (int)(long)arg;

	for (int i = 0; i < PER_THREAD; i++)
		write_sample(&samples[(t * 7 + i) % nsamples]);
	return NULL;
}

/* Run tshark over the capture and compare its opcodes and PSNs with ours. */
static void check_tshark(const char *path)
{
	char cmd[8192], line[1024];
	int nop = 0, npsn = 0, malformed = 0, rc;
	FILE *p;

	if (system("command -v tshark >/dev/null 2>&1") != 0) {
		printf("tshark not installed: skipping the dissection check\n");
		return;
	}
	printf("tshark -V: every packet dissected as InfiniBand, same opcodes and PSNs\n");
	snprintf(cmd, sizeof(cmd),
		 "timeout 60 tshark -r '%s' -d udp.port==4791,infiniband -V 2>&1", path);
	p = popen(cmd, "r");
	if (!p) {
		T_CHECK(0, "popen tshark");
		return;
	}
	while (fgets(line, sizeof(line), p)) {
		char *s = line;
		unsigned v;

		while (*s == ' ')
			s++;
		if (strstr(s, "Malformed") || strstr(s, "malformed"))
			malformed++;
		if (!strncmp(s, "Opcode: ", 8)) {
			char *q = strrchr(s, '(');

			v = q ? (unsigned)strtoul(q + 1, NULL, 10) : 999;
			if (nop < nsamples)
				T_CHECK(v == samples[nop].roce[0], "tshark opcode %u, wrote %u", v,
					samples[nop].roce[0]);
			nop++;
		} else if (sscanf(s, "Packet Sequence Number: %u", &v) == 1) {
			if (npsn < nsamples) {
				const uint8_t *b = samples[npsn].roce;

				T_CHECK(v == ((unsigned)b[9] << 16 | b[10] << 8 | b[11]),
					"tshark PSN %u for packet %d", v, npsn);
			}
			npsn++;
		}
	}
	rc = pclose(p);
	printf("  tshark: %d opcodes, %d PSNs, %d malformed (wrote %d packets)\n", nop, npsn,
	       malformed, nsamples);
	T_CHECK(rc == 0, "tshark exit status %d", rc);
	T_CHECK(nop == nsamples && npsn == nsamples, "tshark saw %d/%d packets of %d", nop, npsn,
		nsamples);
	T_CHECK(malformed == 0, "tshark reports malformed packets");
}

int main(void)
{
	char *files[T_MAX_FILES];
	char path[] = "/tmp/srn_test_pcap_XXXXXX";
	pthread_t th[THREADS];
	int nfiles = t_vector_files(files), fd, n;

	if (nfiles <= 0)
		t_bail("no vectors in %s (set SRN_SOURCE)", t_vectors_dir());
	for (int i = 0; i < nfiles; i++) {
		int taken = 0;

		t_vector_each(files[i], collect, &taken);
		free(files[i]);
	}
	printf("collected %d sample packets (IPv4 and IPv6) from %d captures\n", nsamples,
	       nfiles);
	T_CHECK(nsamples >= nfiles, "too few samples");

	printf("errors: open of a bad path fails, writing with no capture is a no-op\n");
	T_CHECK(net_pcap_open("/nonexistent-dir/x.pcap") < 0, "bad path opened");
	T_CHECK(!net_pcap_enabled(), "enabled after a failed open");
	write_sample(&samples[0]);

	fd = mkstemp(path);
	if (fd < 0) {
		perror("mkstemp");
		return 1;
	}
	close(fd);
	printf("writing %d packets to %s\n", nsamples, path);
	T_CHECK(net_pcap_open(path) == 0, "open %s", path);
	T_CHECK(net_pcap_enabled(), "not enabled after open");
	write_sample(&samples[0]);
	/* flushed per packet: readable while still open */
	T_CHECK(read_back_count(path) == 1, "first packet not on disk before close");
	for (int i = 1; i < nsamples; i++)
		write_sample(&samples[i]);
	T_CHECK(read_back_count(path) == nsamples, "not every packet on disk before close");
	net_pcap_close();
	T_CHECK(!net_pcap_enabled(), "enabled after close");
	write_sample(&samples[0]); /* after close: ignored */

	n = check_file(path, 1);
	printf("  read back %d records identical to what was written\n", n);
	T_CHECK(n == nsamples, "%d of %d records good", n, nsamples);
	check_tshark(path);

	printf("%d threads x %d packets into one capture\n", THREADS, PER_THREAD);
	T_CHECK(net_pcap_open(path) == 0, "reopen %s", path);
	for (long t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, writer_thread, (void *)t);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	net_pcap_close();
	n = check_file(path, 0);
	printf("  %d intact records\n", n);
	T_CHECK(n == THREADS * PER_THREAD, "%d of %d records intact", n, THREADS * PER_THREAD);

	printf("SOFTRNIC_PCAP: net_pcap_open_env opens it once per process\n");
	setenv("SOFTRNIC_PCAP", path, 1);
	T_CHECK(net_pcap_open_env() == 0 && net_pcap_enabled(), "open_env");
	write_sample(&samples[1]);
	net_pcap_close();
	T_CHECK(net_pcap_open_env() == 0 && !net_pcap_enabled(), "open_env twice reopened");
	T_CHECK(read_back_count(path) == 1, "open_env capture has %d records",
		read_back_count(path));

	unlink(path);
	return t_summary();
}
