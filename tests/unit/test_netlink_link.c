/* The rtnetlink link parser (net/netlink_link.c) against crafted
 * datagrams: a link's flags give its bits, the last message about the
 * interface wins, other interfaces and other message types are ignored,
 * RTM_DELLINK means gone; hostile input (lengths that run past the end,
 * zero or short lengths, a message too short for its type, trailing
 * bytes, random bytes, every truncation of a valid datagram) is refused
 * without reading past the buffer (run under ASan by the sanitizer
 * build).  Then the real kernel: the loopback interface's state, asked
 * over a NETLINK_ROUTE socket (no root needed), is up and loopback. */
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/netlink_link.h"
#include "tests/lib/t_util.h"

enum { IDX = 7, F_UP = 0x1, F_LOOPBACK = 0x8, F_LOWER_UP = 0x10000 };

/* Appends one link message (len 0: the right length) with pad bytes of
 * attributes after the ifinfomsg; returns the new datagram length. */
static size_t put_msg(uint8_t *buf, size_t at, uint16_t type, int index, unsigned int flags,
		      size_t pad, uint32_t len)
{
	struct nlmsghdr h = { 0 };
	struct ifinfomsg ifi = { 0 };
	size_t whole = NLMSG_LENGTH(sizeof(ifi)) + pad;

	h.nlmsg_len = len ? len : (uint32_t)whole;
	h.nlmsg_type = type;
	ifi.ifi_index = index;
	ifi.ifi_flags = flags;
	memcpy(buf + at, &h, sizeof(h));
	memcpy(buf + at + NLMSG_HDRLEN, &ifi, sizeof(ifi));
	memset(buf + at + NLMSG_LENGTH(sizeof(ifi)), 0xa5, pad);
	return at + NLMSG_ALIGN(whole);
}

static void crafted(void)
{
	uint8_t buf[1024];
	unsigned int bits;
	size_t n;

	n = put_msg(buf, 0, RTM_NEWLINK, IDX, F_UP | F_LOWER_UP, 40, 0);
	bits = 0;
	T_OK(net_link_parse(buf, n, IDX, &bits) == 1 &&
	     bits == (NET_LINK_ADMIN_UP | NET_LINK_CARRIER) && net_link_is_up(bits),
	     "up with carrier: bits 0x%x, up", bits);
	bits = 0xdead;
	T_OK(net_link_parse(buf, n, IDX + 1, &bits) == 0 && bits == 0xdead,
	     "another interface's message is not ours");

	n = put_msg(buf, 0, RTM_NEWLINK, IDX, F_UP, 0, 0);
	T_OK(net_link_parse(buf, n, IDX, &bits) == 1 && bits == NET_LINK_ADMIN_UP &&
	     !net_link_is_up(bits), "up without carrier: bits 0x%x, down", bits);

	/* three in one datagram: ours up, another's, ours down: down wins */
	n = put_msg(buf, 0, RTM_NEWLINK, IDX, F_UP | F_LOWER_UP, 13, 0);
	n = put_msg(buf, n, RTM_NEWLINK, IDX + 1, 0, 0, 0);
	n = put_msg(buf, n, RTM_NEWLINK, IDX, 0, 5, 0);
	T_OK(net_link_parse(buf, n, IDX, &bits) == 1 && bits == 0,
	     "the last message about the interface wins (admin down: 0x%x)", bits);

	n = put_msg(buf, 0, RTM_DELLINK, IDX, F_UP | F_LOWER_UP, 0, 0);
	T_OK(net_link_parse(buf, n, IDX, &bits) == 1 && (bits & NET_LINK_GONE) &&
	     !net_link_is_up(bits), "RTM_DELLINK: gone, down (0x%x)", bits);

	n = put_msg(buf, 0, RTM_NEWADDR, IDX, F_UP | F_LOWER_UP, 0, 0);
	T_OK(net_link_parse(buf, n, IDX, &bits) == 0, "an address message is ignored");

	n = put_msg(buf, 0, RTM_NEWLINK, 1, F_UP | F_LOWER_UP | F_LOOPBACK, 0, 0);
	T_OK(net_link_parse(buf, n, 1, &bits) == 1 && (bits & NET_LINK_LOOPBACK),
	     "loopback flag seen");

	/* the last message without its padding (length not a multiple of 4) */
	n = put_msg(buf, 0, RTM_NEWLINK, IDX, F_UP | F_LOWER_UP, 3, 0);
	T_OK(net_link_parse(buf, NLMSG_LENGTH(sizeof(struct ifinfomsg)) + 3, IDX, &bits) == 1,
	     "an unpadded last message is read");

	T_OK(net_link_parse(buf, 0, IDX, &bits) == 0, "empty datagram: nothing");
	T_OK(net_link_parse(NULL, 0, IDX, &bits) == 0, "no buffer: nothing");
	T_OK(net_link_parse(buf, 10, IDX, &bits) == -1, "shorter than a header: malformed");

	put_msg(buf, 0, RTM_NEWLINK, IDX, F_UP, 0, 4000);
	T_OK(net_link_parse(buf, 64, IDX, &bits) == -1, "length past the datagram: malformed");
	put_msg(buf, 0, RTM_NEWLINK, IDX, F_UP, 0, 0xffffffffu);
	T_OK(net_link_parse(buf, 64, IDX, &bits) == -1, "length 2^32-1: malformed");
	put_msg(buf, 0, RTM_NEWLINK, IDX, F_UP, 0, 0);
	((struct nlmsghdr *)buf)->nlmsg_len = 0;
	T_OK(net_link_parse(buf, 64, IDX, &bits) == -1, "length 0: malformed (no endless walk)");
	((struct nlmsghdr *)buf)->nlmsg_len = NLMSG_HDRLEN + 4;
	T_OK(net_link_parse(buf, 64, IDX, &bits) == -1,
	     "RTM_NEWLINK too short for its ifinfomsg: malformed");

	/* a good message, then garbage: the good one counts */
	n = put_msg(buf, 0, RTM_NEWLINK, IDX, F_UP | F_LOWER_UP, 0, 0);
	memset(buf + n, 0xff, 20);
	T_OK(net_link_parse(buf, n + 20, IDX, &bits) == 1 && net_link_is_up(bits),
	     "garbage after our message: our message still read");
	/* garbage (3 bytes, less than a header) after a message not ours */
	n = put_msg(buf, 0, RTM_NEWLINK, IDX + 1, 0, 0, 0);
	T_OK(net_link_parse(buf, n + 3, IDX, &bits) == -1, "trailing bytes: malformed");
}

/* Every truncation of a valid three-message datagram, each in a buffer of
 * exactly its length (ASan sees any read past it), and random bytes. */
static void hostile(void)
{
	uint8_t whole[512], *cut;
	unsigned int bits;
	size_t n;
	int bad = 0, found = 0;

	n = put_msg(whole, 0, RTM_NEWLINK, IDX + 1, F_UP, 9, 0);
	n = put_msg(whole, n, RTM_NEWLINK, IDX, F_UP | F_LOWER_UP, 30, 0);
	n = put_msg(whole, n, RTM_DELLINK, IDX + 2, 0, 0, 0);
	for (size_t len = 0; len <= n; len++) {
		int r;

		cut = malloc(len ? len : 1);
		T_ASSERT(cut, "malloc");
		memcpy(cut, whole, len);
		r = net_link_parse(cut, len, IDX, &bits);
		free(cut);
		bad += r < -1 || r > 1;
		found += r == 1;
	}
	T_OK(bad == 0 && found > 0, "%zu truncations: results in {-1,0,1}, %d found ours", n + 1,
	     found);

	t_rand_seed(0x6c696e6b);
	bad = 0;
	for (int i = 0; i < 200000; i++) {
		size_t len = t_rand64() % 96;
		int r;

		cut = malloc(len ? len : 1);
		T_ASSERT(cut, "malloc");
		for (size_t j = 0; j < len; j++)
			cut[j] = (uint8_t)t_rand64();
		/* small lengths now and then, so the walk goes on */
		if (len >= 4 && (i & 1))
			cut[0] = (uint8_t)(t_rand64() % 40), cut[1] = cut[2] = cut[3] = 0;
		r = net_link_parse(cut, len, (int)(t_rand64() % 4), &bits);
		free(cut);
		bad += r < -1 || r > 1;
	}
	T_OK(bad == 0, "200000 random datagrams: results in {-1,0,1}");
}

static void live_loopback(void)
{
	unsigned int bits = 0;
	int idx = (int)if_nametoindex("lo"), fd, r;

	fd = net_link_open();
	if (fd < 0 || idx <= 0) {
		printf("# no NETLINK_ROUTE socket or no lo here (%d): live check skipped\n", fd);
		return;
	}
	r = net_link_query(fd, idx, &bits, 2000);
	T_OK(r == 1 && (bits & NET_LINK_LOOPBACK) && !(bits & NET_LINK_GONE),
	     "the kernel's answer for lo: %d, bits 0x%x (loopback)", r, bits);
	r = net_link_read(fd, idx, &bits, 4);
	T_OK(r >= 0, "nothing more waiting, no error (%d)", r);
	close(fd);
}

int main(void)
{
	crafted();
	hostile();
	live_loopback();
	return t_summary();
}
