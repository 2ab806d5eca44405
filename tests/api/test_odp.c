/* On-demand paging (IBV_ACCESS_ON_DEMAND).  Two processes: the target
 * registers an implicit ODP MR (the whole address space) and only then
 * maps a region; the initiator, whose own buffer is an explicit ODP MR,
 * READs, WRITEs, FETCH_ADDs and SENDs into that region through the
 * implicit MR's keys; once the target unmaps the region, a WRITE there
 * ends in IBV_WC_REM_ACCESS_ERR and the target lives on.  Then, in one
 * process: the same WRITEs, a SEND from an unmapped address of an
 * implicit MR ending in IBV_WC_LOC_PROT_ERR, and the bad inputs of reg_mr, rereg_mr and
 * ibv_advise_mr get their documented errno.  Both paths (on the
 * same-host one the target's ODP pages are reached through
 * process_vm_*, so memory mapped after registration is what is seen). */
#include "t_rc.h"

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

#define REGION (64u << 10)
#define ODP_ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
		 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ON_DEMAND)
#define SEED 100u

struct msg {                         /* target -> initiator */
	struct t_conn conn;          /* rkey: the implicit MR's */
	uint64_t region;             /* mapped after registration */
};

static int xfer(int fd, void *p, size_t n, bool out)
{
	return (out ? write(fd, p, n) : read(fd, p, n)) == (ssize_t)n ? 0 : -1;
}

static struct ibv_mr *implicit_mr(struct ibv_pd *pd)
{
	return ibv_reg_mr(pd, NULL, SIZE_MAX, ODP_ACC);
}

/* The target: implicit MR, region mapped afterwards, checks what landed. */
static int target(int sock)
{
	struct t_end b;
	struct t_conn peer;
	struct msg m;
	struct ibv_mr *imr;
	struct ibv_wc wc;
	uint8_t *region, expect[4096];
	uint64_t word;
	char go;

	if (t_end_init(&b) || !(imr = implicit_mr(b.pd)))
		return 2;
	m.conn = t_info(&b, 200);
	m.conn.rkey = imr->rkey;
	region = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		return 2;
	fill(region, 4096, 5);
	word = SEED;
	memcpy(region + 16384, &word, 8);
	m.region = (uintptr_t)region;
	struct ibv_sge sge = { .addr = m.region + 8192, .length = 4096, .lkey = imr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (xfer(sock, &m, sizeof(m), true) || xfer(sock, &peer, sizeof(peer), false) ||
	    t_connect(&b, 200, &peer, 14, 7, 7) || ibv_post_recv(b.qp, &rwr, &bad))
		return 2;
	go = 1;
	CHECK(!xfer(sock, &go, 1, true) && !xfer(sock, &go, 1, false), "sync 1");
	CHECK(!t_wait(b.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.byte_len == 4096,
	      "target: SEND received into the late-mapped region (%s)",
	      ibv_wc_status_str(wc.status));
	fill(expect, 4096, 7);
	CHECK(!memcmp(region + 8192, expect, 4096), "target: SEND bytes in the region");
	fill(expect, 4096, 6);
	CHECK(!memcmp(region + 4096, expect, 4096), "target: WRITE bytes in the region");
	memcpy(&word, region + 16384, 8);
	CHECK(word == SEED + 7, "target: FETCH_ADD made %llu", (unsigned long long)word);
	munmap(region, REGION);
	go = failures ? 0 : 1;
	CHECK(!xfer(sock, &go, 1, true) && !xfer(sock, &go, 1, false), "sync 2");
	ibv_destroy_qp(b.qp);
	b.qp = NULL;
	ibv_dereg_mr(imr);
	t_end_fini(&b);
	return failures ? 1 : 0;
}

static enum ibv_wc_status op(struct t_end *a, enum ibv_wr_opcode o, struct ibv_sge *sge,
			     uint64_t raddr, uint32_t rkey, uint64_t add)
{
	struct ibv_send_wr wr = { .wr_id = o, .sg_list = sge, .num_sge = 1, .opcode = o,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_wc wc;

	if (o == IBV_WR_ATOMIC_FETCH_AND_ADD)
		wr.wr.atomic.compare_add = add;
	if (t_post_remote(a->qp, &wr, raddr, rkey) || t_wait(a->cq, &wc))
		return IBV_WC_GENERAL_ERR;
	return wc.status;
}

/* The initiator: its own buffer an explicit ODP MR. */
static void initiator(int sock)
{
	struct t_end a;
	struct msg m;
	struct t_conn me;
	struct ibv_mr *omr;
	uint8_t *lb, expect[4096];
	uint64_t word;
	char go;

	if (t_end_init(&a)) {
		CHECK(0, "initiator end");
		return;
	}
	lb = a.buf + (4u << 20);
	omr = ibv_reg_mr(a.pd, lb, 1u << 20, ODP_ACC);
	CHECK(omr != NULL, "explicit ODP MR");
	me = t_info(&a, 100);
	if (!omr || xfer(sock, &m, sizeof(m), false) || xfer(sock, &me, sizeof(me), true) ||
	    t_connect(&a, 100, &m.conn, 14, 7, 7)) {
		CHECK(0, "exchange and connect");
		return;
	}
	struct ibv_sge sge = { .addr = (uintptr_t)lb, .length = 4096, .lkey = omr->lkey };

	/* the target is connected and its receive posted */
	CHECK(!xfer(sock, &go, 1, false), "sync 1: ready");
	memset(lb, 0, 4096);
	CHECK(op(&a, IBV_WR_RDMA_READ, &sge, m.region, m.conn.rkey, 0) == IBV_WC_SUCCESS,
	      "READ from the target's late-mapped region");
	fill(expect, 4096, 5);
	CHECK(!memcmp(lb, expect, 4096), "READ brought the region's bytes");
	fill(lb, 4096, 6);
	CHECK(op(&a, IBV_WR_RDMA_WRITE, &sge, m.region + 4096, m.conn.rkey, 0) == IBV_WC_SUCCESS,
	      "WRITE into the region");
	sge.length = 8;
	CHECK(op(&a, IBV_WR_ATOMIC_FETCH_AND_ADD, &sge, m.region + 16384, m.conn.rkey, 7) ==
		      IBV_WC_SUCCESS, "FETCH_ADD in the region");
	memcpy(&word, lb, 8);
	CHECK(word == SEED, "FETCH_ADD fetched %llu", (unsigned long long)word);
	fill(lb, 4096, 7);
	sge.length = 4096;
	CHECK(op(&a, IBV_WR_SEND, &sge, 0, 0, 0) == IBV_WC_SUCCESS, "SEND into the region");
	CHECK(!xfer(sock, &go, 1, true), "sync 1: done");
	CHECK(!xfer(sock, &go, 1, false) && go == 1, "the target saw every byte");
	printf("implicit ODP: READ, WRITE, FETCH_ADD, SEND into memory mapped after "
	       "registration ok\n");
	/* unmapped now: the target refuses, as a NIC whose page fault fails */
	CHECK(op(&a, IBV_WR_RDMA_WRITE, &sge, m.region, m.conn.rkey, 0) == IBV_WC_REM_ACCESS_ERR,
	      "WRITE into the unmapped region -> REM_ACCESS_ERR");
	printf("implicit ODP: a WRITE into unmapped memory -> REM_ACCESS_ERR\n");
	CHECK(!xfer(sock, &go, 1, true), "sync 2");
	ibv_dereg_mr(omr);
	t_end_fini(&a);
}

/* In one process (the same-host path's peer is then this process): a
 * WRITE through b's implicit MR into a page b maps afterwards, then into
 * one it has unmapped (remote == true); or a SEND gathering from an
 * unmapped address of a's implicit MR.  Each fault fails the WR, not the
 * process. */
static void one_process(bool remote)
{
	struct t_end a, b;
	struct t_end *owner;
	struct ibv_mr *imr;
	uint8_t *page;
	struct ibv_sge sge;

	t_pair(&a, &b, 14, 7, 7);
	owner = remote ? &b : &a;
	imr = implicit_mr(owner->pd);
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(imr && page != MAP_FAILED, "implicit MR and a page");
	if (!imr || page == MAP_FAILED)
		return;
	if (remote) {
		sge = (struct ibv_sge){ .addr = (uintptr_t)a.buf, .length = 64, .lkey = a.mr->lkey };
		fill(a.buf, 64, 9);
		CHECK(op(&a, IBV_WR_RDMA_WRITE, &sge, (uintptr_t)page, imr->rkey, 0) ==
			      IBV_WC_SUCCESS && !memcmp(page, a.buf, 64),
		      "one process: WRITE into a page mapped after the implicit MR");
		munmap(page, 4096);
		CHECK(op(&a, IBV_WR_RDMA_WRITE, &sge, (uintptr_t)page, imr->rkey, 0) ==
			      IBV_WC_REM_ACCESS_ERR,
		      "one process: WRITE into an unmapped page -> REM_ACCESS_ERR");
	} else {
		munmap(page, 4096);
		sge = (struct ibv_sge){ .addr = (uintptr_t)page, .length = 64, .lkey = imr->lkey };
		CHECK(!post_recv(&b, RECV_OFF, 64, 1), "post_recv");
		CHECK(op(&a, IBV_WR_SEND, &sge, 0, 0, 0) == IBV_WC_LOC_PROT_ERR,
		      "SEND from an unmapped address of an implicit MR -> LOC_PROT_ERR");
	}
	printf("implicit ODP, one process: %s\n",
	       remote ? "WRITE into a late page ok, into an unmapped one REM_ACCESS_ERR"
		      : "a SEND from unmapped memory -> LOC_PROT_ERR");
	ibv_destroy_qp(a.qp);
	a.qp = NULL;
	ibv_dereg_mr(imr);
	t_end_fini(&a);
	t_end_fini(&b);
}

/* reg_mr, rereg_mr and advise_mr inputs. */
static void api(void)
{
	struct ibv_context *ctx = t_open();
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_mr *imr, *mr, *plain;
	uint8_t *ro, *rw, buf[64];
	struct ibv_sge sge;
	unsigned char vec[4];

	if (!pd) {
		CHECK(0, "context and PD");
		return;
	}
	errno = 0;
	mr = ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE);
	CHECK(!mr && errno == EINVAL, "the whole address space without ON_DEMAND -> EINVAL (%d)",
	      errno);
	errno = 0;
	mr = ibv_reg_mr_iova(pd, NULL, SIZE_MAX, 4096, ODP_ACC);
	CHECK(!mr && errno == EINVAL, "implicit ODP MR at an iova other than 0 -> EINVAL (%d)",
	      errno);
	imr = implicit_mr(pd);
	CHECK(imr && imr->addr == NULL && imr->length == SIZE_MAX, "implicit ODP MR");
	plain = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(imr && ibv_rereg_mr(imr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
				  IBV_ACCESS_LOCAL_WRITE) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL,
	      "rereg dropping ON_DEMAND from the implicit MR -> EINVAL");
	CHECK(plain && ibv_rereg_mr(plain, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
				    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND) == 0,
	      "rereg making a plain MR ODP");
	if (!imr || !plain)
		return;

	rw = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(rw != MAP_FAILED && ro != MAP_FAILED, "mmap");
	sge = (struct ibv_sge){ .addr = (uintptr_t)rw, .length = 4 * 4096, .lkey = imr->lkey };
	CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 2, &sge, 1) == EINVAL,
	      "advise_mr with an unknown flag -> EINVAL");
	CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 0) == EINVAL,
	      "advise_mr with no SGE -> EINVAL");
	CHECK(ibv_advise_mr(pd, (enum ibv_advise_mr_advice)99, 0, &sge, 1) == EOPNOTSUPP,
	      "advise_mr with an unknown advice -> EOPNOTSUPP");
	CHECK(mincore(rw, 4 * 4096, vec) == 0 && !(vec[0] & 1) && !(vec[3] & 1),
	      "a fresh mapping has no page yet");
	CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH,
			    &sge, 1) == 0, "PREFETCH_WRITE of a fresh mapping");
	CHECK(mincore(rw, 4 * 4096, vec) == 0 && (vec[0] & vec[1] & vec[2] & vec[3] & 1),
	      "its pages are present after the prefetch");
	sge.addr = (uintptr_t)ro;
	sge.length = 4096;
	CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1) == 0,
	      "PREFETCH (read) of a read-only page");
	CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, &sge, 1) == EFAULT,
	      "PREFETCH_WRITE of a read-only page -> EFAULT");
	munmap(rw, 4 * 4096);
	sge.addr = (uintptr_t)rw;
	CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1) == EFAULT,
	      "PREFETCH of unmapped memory -> EFAULT");
	CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0, &sge, 1) == 0,
	      "PREFETCH_NO_FAULT faults nothing, so nothing fails");
	sge.lkey = imr->lkey ^ 0x100;
	CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1) == EFAULT,
	      "advise_mr with a bad lkey -> EFAULT");
	/* plain became ODP above: give it back its plain access first */
	CHECK(ibv_rereg_mr(plain, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_LOCAL_WRITE) == 0, "rereg back to plain");
	sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = sizeof(buf), .lkey = plain->lkey };
	CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1) == EFAULT,
	      "advise_mr on an MR that is not ODP -> EFAULT");
	sge.lkey = imr->lkey;
	sge.length = 0;
	CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1) == 0,
	      "a zero-length SGE asks for nothing");
	printf("ODP API: reg_mr, rereg_mr and advise_mr inputs checked\n");
	munmap(ro, 4096);
	ibv_dereg_mr(plain);
	ibv_dereg_mr(imr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
}

int main(void)
{
	int sv[2], st = 0;
	pid_t pid;
	struct t_log log;
	unsigned long long vm;
	bool udp = getenv("SOFTRNIC_TRANSPORT") && !strcmp(getenv("SOFTRNIC_TRANSPORT"), "udp");
	FILE *f;

	struct ibv_device **list = ibv_get_device_list(NULL);
	bool lo = false;

	for (int i = 0; list && list[i]; i++)
		lo |= !strcmp(ibv_get_device_name(list[i]), "srn_lo");
	if (list)
		ibv_free_device_list(list);
	if (!lo) {
		printf("SKIP: srn_lo not available\n");
		return 77;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || t_log_begin(&log))
		return 1;
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		_exit(target(sv[1]));
	}
	close(sv[1]);
	initiator(sv[0]);
	close(sv[0]);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "the target exited cleanly (status %d)", st);
	f = t_log_end(&log);
	vm = f ? t_counter_sum(f, "direct_vm") : 0;
	if (f)
		t_echo_failures(f);
	/* the target's ODP pages are not shared: READ, WRITE and SEND reach
	 * them with process_vm_* (the atomic goes as packets) */
	printf("direct_vm %llu\n", vm);
	if (udp)
		CHECK(vm == 0, "nothing direct under SOFTRNIC_TRANSPORT=udp");
	else
		CHECK(vm == 3, "the initiator reached the late-mapped region with process_vm_* "
		      "(READ, WRITE, SEND)");
	one_process(true);
	one_process(false);
	api();
	printf(failures ? "FAIL (%d)\n" : "PASS\n", failures);
	return failures ? 1 : 0;
}
