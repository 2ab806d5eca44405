/* transport/link_watch: the port follows its interface.  Each engine
 * watches the link of its device's interface (net/netlink_link.h) in its
 * epoll set: carrier or admin down makes ibv_query_port report
 * IBV_PORT_DOWN and raises IBV_EVENT_PORT_ERR on the engine's context; up
 * again, IBV_PORT_ACTIVE and IBV_EVENT_PORT_ACTIVE.  QPs are left alone:
 * RC retries across the outage as across any loss.  Loopback is not
 * watched (always active). */
#ifndef TRANSPORT_LINK_WATCH_H
#define TRANSPORT_LINK_WATCH_H

struct srn_engine;

/* Learn the interface's state and join eng->epfd with the notice socket
 * (eng->link_fd, -1 when not watching: loopback, or no netlink). */
void srn_link_watch_start(struct srn_engine *eng);
/* eng->link_fd is readable (engine thread). */
void srn_link_watch_event(struct srn_engine *eng);
void srn_link_watch_stop(struct srn_engine *eng);

#endif
