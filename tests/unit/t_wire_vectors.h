/* Test helper: iterate the RoCEv2 packets of every capture in
 * $SRN_SOURCE/tests/vectors/ (sorted by name).  Header-only, static: each
 * unit test is one executable. */
#ifndef T_WIRE_VECTORS_H
#define T_WIRE_VECTORS_H

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/pcap.h"
#include "wire/wire.h"

#define T_MAX_FILES 64
#define T_FRAME_MAX 65536

struct t_vec_pkt {
	const char *file;            /* base name of the capture */
	unsigned index;              /* record number in the file, from 0 */
	const uint8_t *frame;        /* whole captured frame */
	size_t frame_len;
	int linktype;
	struct wire_l3 l3;           /* as captured, including the IPv4 ID */
	const uint8_t *roce;         /* BTH .. ICRC inclusive */
	size_t roce_len;
};

static int t_cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *t_vectors_dir(void)
{
	static char dir[4096];
	const char *src = getenv("SRN_SOURCE");

	snprintf(dir, sizeof(dir), "%s/tests/vectors", src ? src : ".");
	return dir;
}

/* Sorted names of *.pcap in the vectors directory; returns the count, or
 * -1 if the directory cannot be read. */
static int __attribute__((unused)) t_vector_files(char *names[T_MAX_FILES])
{
	DIR *d = opendir(t_vectors_dir());
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)) && n < T_MAX_FILES) {
		size_t l = strlen(e->d_name);

		if (l > 5 && !strcmp(e->d_name + l - 5, ".pcap"))
			names[n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof(names[0]), t_cmp_str);
	return n;
}

/* Call fn for every RoCEv2 packet in file; returns how many packets, or -1
 * if the file cannot be read or holds a damaged UDP/4791 frame. */
static int t_vector_each(const char *file, void (*fn)(const struct t_vec_pkt *, void *),
			 void *arg)
{
	static uint8_t frame[T_FRAME_MAX];
	struct net_pcap_reader r;
	char path[4352];
	struct t_vec_pkt p;
	int count = 0, rc;

	snprintf(path, sizeof(path), "%s/%s", t_vectors_dir(), file);
	if (net_pcap_reader_open(&r, path) < 0) {
		fprintf(stderr, "cannot read %s\n", path);
		return -1;
	}
	memset(&p, 0, sizeof(p));
	p.file = file;
	p.linktype = (int)r.linktype;
	p.frame = frame;
	for (unsigned i = 0; i < 1000000; i++) {
		rc = net_pcap_reader_next(&r, frame, sizeof(frame), &p.frame_len, NULL);
		if (rc <= 0) {
			if (rc < 0)
				count = -1;
			break;
		}
		p.index = i;
		rc = wire_frame_parse(frame, p.frame_len, p.linktype, &p.l3,
				      &p.roce, &p.roce_len);
		if (rc == -ENOENT)
			continue;
		if (rc < 0) {
			fprintf(stderr, "%s #%u: frame parse failed (%d)\n", file, i, rc);
			count = -1;
			break;
		}
		count++;
		fn(&p, arg);
	}
	net_pcap_reader_close(&r);
	return count;
}

#endif
