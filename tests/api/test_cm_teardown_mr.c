/* The CM's objects survive ibv_reg_mr / ibv_dereg_mr of a neighbouring
 * heap buffer (regression: rping's client hung in rdma_destroy_id).
 *
 * Registration and the last deregistration re-back the pages of an MR
 * (verbs/mr_share.c: copy, then remap); a store another thread makes into
 * such a page in between is lost.  rping registers buffers inside a small
 * heap struct, and librdmacm used to calloc its event channel and id right
 * next to it, while every page an MR touched was re-backed: the CM
 * agent's DISCONNECTED (queue links, the channel lock's unlock, the id's
 * unacked count) was lost while rping deregistered its buffers, and
 * rdma_destroy_id waited forever for an ack.  Now mr_share.c re-backs
 * only pages an MR covers whole, never a page it shares with a neighbour.
 *
 * Stress: one thread posts events on the id (rdma_resolve_addr, one
 *    ADDR_RESOLVED each), another takes and acks them, while the main
 *    thread registers and deregisters two heap buffers allocated right
 *    after the channel and id (64 bytes, as rping's, and three pages,
 *    whose first page is partly someone else's), for ~2 s.  Every posted
 *    event must arrive (none lost), and rdma_destroy_id and
 *    rdma_destroy_event_channel must return (no lost ack, no lock left
 *    held).  With calloc'd CM objects and a re-back of every page an MR
 *    touches, this hung within a few hundred cycles.  A watchdog fails the
 *    test instead of hanging.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "tests/lib/t_cm.h"
#include "tests/lib/t_util.h"

enum {
	EVENTS = 1000000,            /* posted at most */
	STRESS_MS = 2000,            /* stop posting after this */
	EVENT_WAIT_MS = 3000,        /* a posted event must arrive by then */
	WATCHDOG_S = 30,
	SMALL = 64,                  /* rping's default buffer size */
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void watchdog(int sig)
{
	static const char msg[] = "FAIL - watchdog: a CM call never returned (lost store?)\n";

	(void)sig;
	if (write(1, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static uintptr_t page_of(const void *p)
{
	return (uintptr_t)p / (uintptr_t)sysconf(_SC_PAGESIZE);
}

/* ---- 2. stress ----------------------------------------------------------- */

struct stress {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	atomic_int posted, got, post_errors;
	atomic_bool posting_done, consumer_done;
	bool lost;                   /* consumer timed out on a posted event */
	int wrong;                   /* events of another type */
};

static void *poster(void *arg)
{
	struct stress *s = arg;
	struct sockaddr_in dst = t_cm_loopback(1);
	uint64_t end = now_ms() + STRESS_MS;

	for (int i = 0; i < EVENTS && now_ms() < end; i++) {
		if (rdma_resolve_addr(s->id, NULL, (struct sockaddr *)&dst, 1000)) {
			atomic_fetch_add(&s->post_errors, 1);
			break;
		}
		atomic_fetch_add(&s->posted, 1);
		/* let the queue drain now and then: keeps the consumer busy
		 * (its pops and acks are stores into the CM objects too) */
		if ((i & 63) == 63)
			usleep(50);
	}
	atomic_store(&s->posting_done, true);
	return NULL;
}

static void *consumer(void *arg)
{
	struct stress *s = arg;

	while (!atomic_load(&s->posting_done) ||
	       atomic_load(&s->got) < atomic_load(&s->posted)) {
		struct rdma_cm_event *ev;

		if (atomic_load(&s->got) >= atomic_load(&s->posted)) {
			usleep(10);
			continue;
		}
		ev = t_cm_event(s->ch, EVENT_WAIT_MS);
		if (!ev) {
			s->lost = true;
			break;
		}
		if (ev->event != RDMA_CM_EVENT_ADDR_RESOLVED)
			s->wrong++;
		rdma_ack_cm_event(ev);
		atomic_fetch_add(&s->got, 1);
	}
	atomic_store(&s->consumer_done, true);
	return NULL;
}

static void stress(void)
{
	struct stress s = { 0 };
	struct sockaddr_in dst = t_cm_loopback(1);
	struct rdma_cm_event *ev;
	struct ibv_pd *pd;
	pthread_t tp, tc;
	char *buf, *big;
	size_t big_len = 3 * (size_t)sysconf(_SC_PAGESIZE);
	int cycles = 0, reg_errors = 0;

	s.ch = rdma_create_event_channel();
	if (!s.ch || rdma_create_id(s.ch, &s.id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(s.id, NULL, (struct sockaddr *)&dst, 1000) ||
	    !(ev = t_cm_event(s.ch, EVENT_WAIT_MS))) {
		T_OK(0, "stress: set-up (channel, id, first ADDR_RESOLVED)");
		return;
	}
	rdma_ack_cm_event(ev);
	pd = ibv_alloc_pd(s.id->verbs);
	/* Allocated right after the CM objects, as rping's buffers are:
	 * with heap-allocated CM objects this shared their page. */
	buf = malloc(SMALL);
	big = malloc(big_len);
	if (!pd || !buf || !big) {
		T_OK(0, "stress: PD and buffers");
		return;
	}
	memset(buf, 1, SMALL);
	memset(big, 1, big_len);
	printf("  # the buffer %s a page with the channel or the id\n",
	       page_of(buf) == page_of(s.ch) || page_of(buf) == page_of(s.id) ?
	       "shares" : "does not share");
	if (pthread_create(&tp, NULL, poster, &s) || pthread_create(&tc, NULL, consumer, &s)) {
		T_OK(0, "stress: threads");
		return;
	}
	while (!atomic_load(&s.consumer_done)) {
		const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_WRITE;
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, SMALL, acc);
		struct ibv_mr *mr2 = ibv_reg_mr(pd, big, big_len, acc);

		if (!mr || ibv_dereg_mr(mr) || !mr2 || ibv_dereg_mr(mr2))
			reg_errors++;
		cycles++;
	}
	pthread_join(tp, NULL);
	pthread_join(tc, NULL);
	printf("  # %d events posted, %d taken, %d reg/dereg cycles\n",
	       atomic_load(&s.posted), atomic_load(&s.got), cycles);
	T_OK(!atomic_load(&s.post_errors) && atomic_load(&s.posted) > 0,
	      "stress: rdma_resolve_addr posted %d events without error", atomic_load(&s.posted));
	T_OK(!reg_errors, "stress: %d reg/dereg cycles of two neighbouring buffers, no error", cycles);
	T_OK(!s.lost && atomic_load(&s.got) == atomic_load(&s.posted) && !s.wrong,
	      "stress: every posted event arrived (%d of %d), all ADDR_RESOLVED",
	      atomic_load(&s.got), atomic_load(&s.posted));
	T_OK(t_cm_event(s.ch, 0) == NULL, "stress: nothing more queued");
	T_OK(rdma_destroy_id(s.id) == 0, "stress: rdma_destroy_id returns (all acks counted)");
	rdma_destroy_event_channel(s.ch);
	T_OK(1, "stress: rdma_destroy_event_channel returns");
	ibv_dealloc_pd(pd);
	free(buf);
	free(big);
}

int main(void)
{
	struct ibv_device **list;
	int n = 0;

	setvbuf(stdout, NULL, _IONBF, 0);
	signal(SIGALRM, watchdog);
	alarm(WATCHDOG_S);
	list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		t_skip("no softrnic device");
	}
	ibv_free_device_list(list);
	stress();
	return t_summary();
}
