/* The engine's link watch (transport/link_watch.h).  Port states as rxe
 * reports them for its netdev: ACTIVE (phys LinkUp) while the interface
 * is up with carrier; else DOWN, phys Polling while it is still
 * configured up (no carrier), Disabled when it was set down. */
#include "transport/link_watch.h"
#include "transport/engine.h"
#include "net/netlink_link.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

enum { PHYS_POLLING = 2, PHYS_DISABLED = 3, PHYS_LINK_UP = 5 };
/* How long ibv_open_device waits for the kernel's answer. */
enum { LINK_QUERY_MS = 500 };
/* Datagrams read per wake-up: the rest wakes the engine again. */
enum { LINK_READ_MAX = 16 };

static uint16_t port_link(unsigned int bits)
{
	if (net_link_is_up(bits))
		return IBV_PORT_ACTIVE | PHYS_LINK_UP << 8;
	if ((bits & NET_LINK_ADMIN_UP) && !(bits & NET_LINK_GONE))
		return IBV_PORT_DOWN | PHYS_POLLING << 8;
	return IBV_PORT_DOWN | PHYS_DISABLED << 8;
}

/* Record what the kernel said; a change of up/down raises the event. */
static void link_apply(struct srn_engine *eng, unsigned int bits, bool announce)
{
	struct srn_context *ctx = eng->ctx;
	bool up = net_link_is_up(bits);

	atomic_store_explicit(&ctx->dev->port_link, port_link(bits), memory_order_relaxed);
	if (announce && up != eng->link_up) {
		struct ibv_async_event ev;

		memset(&ev, 0, sizeof(ev));
		ev.event_type = up ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR;
		ev.element.port_num = 1;
		srn_async_post(ctx, &ev);
		srn_dbg(eng, "%s: link %s (flags 0x%x): %s", ctx->dev->ifname,
			up ? "up" : "down", bits, ibv_event_type_str(ev.event_type));
	}
	eng->link_up = up;
}

void srn_link_watch_start(struct srn_engine *eng)
{
	struct srn_device *dev = eng->ctx->dev;
	struct epoll_event ev = { .events = EPOLLIN };
	unsigned int bits = 0;
	int fd = net_link_open(), r;

	eng->link_fd = -1;
	if (fd < 0) {
		srn_dbg(eng, "no link watch (%s): the port stays active", strerror(-fd));
		return;
	}
	r = net_link_query(fd, dev->ifindex, &bits, LINK_QUERY_MS);
	if (r <= 0 || (bits & NET_LINK_LOOPBACK)) {
		if (r <= 0)
			srn_dbg(eng, "%s: link state unknown (%s): the port stays active",
				dev->ifname, r ? strerror(-r) : "no answer");
		close(fd);
		return;
	}
	ev.data.fd = fd;
	if (epoll_ctl(eng->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		close(fd);
		return;
	}
	eng->link_fd = fd;
	link_apply(eng, bits, false);
}

void srn_link_watch_event(struct srn_engine *eng)
{
	unsigned int bits = 0;
	int r = net_link_read(eng->link_fd, eng->ctx->dev->ifindex, &bits, LINK_READ_MAX);

	if (r == -ENOBUFS) {
		/* notices were lost: the answer to this comes as one */
		net_link_request(eng->link_fd, eng->ctx->dev->ifindex, 2);
		return;
	}
	if (r > 0)
		link_apply(eng, bits, true);
}

void srn_link_watch_stop(struct srn_engine *eng)
{
	if (eng->link_fd >= 0)
		close(eng->link_fd);
	eng->link_fd = -1;
}
