/* transport/engine_main: the engine thread's loop.  It sleeps in epoll
 * on the sockets, the QP timer, the CQ-armed and stop eventfds, the link
 * watch and port 4791's holder, and hands each wake-up to its part. */
#include <errno.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "net/shm_ring.h"
#include "transport/link_watch.h"
#include "transport/engine_priv.h"


/* epoll_wait until end_ns at the latest (a deferral step's end):
 * epoll_pwait2 for its nanoseconds, or where the kernel lacks it (before
 * 5.11) epoll_wait rounded up to the millisecond. */
static int wait_step(struct srn_engine *eng, struct epoll_event *ev, int max, uint64_t end_ns)
{
	static atomic_bool no_pwait2;
	uint64_t now = srn_now_ns(), left = end_ns > now ? end_ns - now : 0;

	if (!atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
		struct timespec to = { (time_t)(left / 1000000000ull),
				       (long)(left % 1000000000ull) };
		int n = epoll_pwait2(eng->epfd, ev, max, &to, NULL);

		if (n >= 0 || errno != ENOSYS)
			return n;
		atomic_store_explicit(&no_pwait2, true, memory_order_relaxed);
	}
	return epoll_wait(eng->epfd, ev, max, (int)((left + 999999) / 1000000));
}

/* eng_main's wait: until the deferral step's end or the next takeover
 * try, whichever is first (*step_end: the step's).  0: neither, no
 * timeout. */
static uint64_t wait_end(struct srn_engine *eng, const struct engine_defer *d, bool *step_end)
{
	uint64_t end = eng_rxp_step_end(&d->pol);

	*step_end = end != 0;
	if (__builtin_expect(eng->roce_retry_ns != 0, 0) && (!end || eng->roce_retry_ns < end)) {
		end = eng->roce_retry_ns;
		*step_end = false;
	}
	if (eng_roce6_wanted(eng)) {
		uint64_t r6 = atomic_load_explicit(&eng->roce6_try_ns, memory_order_relaxed) +
			      ROCE6_RETRY_NS;

		if (!end || r6 < end) {
			end = r6;
			*step_end = false;
		}
	}
	return end;
}

void *eng_main(void *arg)
{
	struct srn_engine *eng = arg;
	struct epoll_event ev[8];
	struct engine_defer defer = { 0 };
	uint64_t end;
	bool step_end;

	eng_rx_set_thread(eng);
	eng_thread_setup(eng);

	for (;;) {
		int idle = eng_shm_idle(eng, &defer), n;

		if (idle < 0)
			continue;
		eng_timer_rearm(eng);
		end = wait_end(eng, &defer, &step_end);
		if (end)
			n = wait_step(eng, ev, 8, end);
		else
			n = epoll_wait(eng->epfd, ev, 8, -1);
		atomic_fetch_add_explicit(&eng->cnt[SRN_CNT_engine_wakes], 1, memory_order_relaxed);
		if (idle > 0) {
			net_shm_inbox_set_sleeping(eng->inbox, false);
			atomic_store(&eng->shm_asleep, false);
		}
		eng_roce_retry_due(eng);
		if (n == 0 && step_end) {
			/* the step is over (QP deadlines passed meanwhile
			 * too, if the application stopped running them) */
			srn_engine_run_qp_timers(eng, srn_now_ns());
			eng_rx_event(eng, &defer, ENG_EV_STEP_END);
		}
		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++) {
			int fd = ev[i].data.fd;

			if (fd == eng->efd)
				return NULL;
			if (fd == eng->kfd) {
				uint64_t x;

				if (read(eng->kfd, &x, sizeof(x)) < 0 && errno != EAGAIN)
					continue;
				/* a CQ was armed while we deferred */
				eng_rx_event(eng, &defer, ENG_EV_CQ_ARMED);
				continue;
			}
			if (fd == eng->tfd) {
				uint64_t x;

				if (read(eng->tfd, &x, sizeof(x)) < 0 && errno != EAGAIN)
					continue;
				eng_timer_fired(eng);
				eng_rx_event(eng, &defer, ENG_EV_TIMER);
			} else if (fd == eng->udp.fd ||
				   (eng->udp6.fd >= 0 && fd == eng->udp6.fd) ||
				   (eng->roce6.fd >= 0 && fd == eng->roce6.fd) ||
				   (eng->roce.fd >= 0 && fd == eng->roce.fd)) {
				eng_rx_event(eng, &defer, ENG_EV_SOCKET);
			} else if (eng->link_fd >= 0 && fd == eng->link_fd) {
				srn_link_watch_event(eng);
			} else if (!eng->roce_port.held && eng->roce_port.fd >= 0 &&
				   fd == eng->roce_port.fd) {
				eng_roce_watch_event(eng, ev[i].events);
			}
		}
	}
	return NULL;
}

