/* ibv_rereg_mr leaves the MR usable, with the same keys, by a peer that
 * cached the old translation (the same-host path keeps a view of each
 * peer MR): after CHANGE_TRANSLATION a WRITE and a READ reach the new
 * buffer and the old one is untouched, and a WRITE to the old addresses
 * ends in REM_ACCESS_ERR; after CHANGE_PD to another PD and back the MR
 * works again, and while it is in the other PD a WRITE ends in
 * REM_ACCESS_ERR; an ODP MR moved to memory mapped afterwards works too.
 * Both paths. */
#include "t_rc.h"

#include <errno.h>
#include <sys/mman.h>

#define LEN 8192u
#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static enum ibv_wc_status rdma(struct t_end *a, enum ibv_wr_opcode op, uint64_t loff,
			       uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct ibv_wc wc;

	if (post_send(a, op, loff, len, raddr, rkey, 0, op) || t_wait(a->cq, &wc))
		return IBV_WC_GENERAL_ERR;
	return wc.status;
}

/* b's MR over buf, used from a, moved to buf2 (ODP: odp). */
static void translation(bool odp)
{
	struct t_end a, b;
	struct ibv_mr *mr;
	uint8_t *old = aligned_alloc(4096, LEN), *neu;
	uint32_t key;
	const char *tag = odp ? "ODP MR" : "MR";

	t_pair(&a, &b, 14, 7, 7);
	mr = ibv_reg_mr(b.pd, old, LEN, ACC | (odp ? IBV_ACCESS_ON_DEMAND : 0));
	CHECK(old && mr, "%s over the first buffer", tag);
	if (!mr)
		return;
	memset(old, 0, LEN);
	fill(a.buf, LEN, 1);
	CHECK(rdma(&a, IBV_WR_RDMA_WRITE, 0, LEN, (uintptr_t)old, mr->rkey) == IBV_WC_SUCCESS &&
	      !memcmp(old, a.buf, LEN), "%s: WRITE before the rereg", tag);
	/* the new buffer: mapped only now (for the ODP MR, after it was
	 * registered) */
	neu = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	key = mr->rkey;
	CHECK(neu != MAP_FAILED && ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, neu,
						LEN, 0) == 0 && mr->rkey == key &&
		      mr->addr == neu, "%s: rereg to a new buffer keeps the keys", tag);
	fill(a.buf, LEN, 2);
	CHECK(rdma(&a, IBV_WR_RDMA_WRITE, 0, LEN, (uintptr_t)neu, key) == IBV_WC_SUCCESS &&
	      !memcmp(neu, a.buf, LEN), "%s: WRITE lands in the new buffer", tag);
	fill(a.buf + LEN, LEN, 1);
	CHECK(!memcmp(old, a.buf + LEN, LEN), "%s: the old buffer is untouched", tag);
	memset(a.buf + 2 * LEN, 0, LEN);
	CHECK(rdma(&a, IBV_WR_RDMA_READ, 2 * LEN, LEN, (uintptr_t)neu, key) == IBV_WC_SUCCESS &&
	      !memcmp(a.buf + 2 * LEN, a.buf, LEN), "%s: READ of the new buffer", tag);
	CHECK(rdma(&a, IBV_WR_RDMA_WRITE, 0, 64, (uintptr_t)old, key) == IBV_WC_REM_ACCESS_ERR,
	      "%s: WRITE to the old address -> REM_ACCESS_ERR", tag);
	printf("%s: rereg of the translation: new buffer written and read, old one refused\n",
	       tag);
	ibv_destroy_qp(a.qp);
	a.qp = NULL;
	ibv_dereg_mr(mr);
	munmap(neu, LEN);
	free(old);
	t_end_fini(&a);
	t_end_fini(&b);
}

static void pd_move(void)
{
	struct t_end a, b;
	struct ibv_pd *pd2;
	struct ibv_context *other = t_open();
	struct ibv_pd *foreign = other ? ibv_alloc_pd(other) : NULL;
	uint64_t raddr;

	t_pair(&a, &b, 14, 7, 7);
	pd2 = ibv_alloc_pd(b.ctx);
	raddr = (uintptr_t)b.buf + RX_OFF;
	CHECK(pd2 && foreign, "second PD, PD of another context");
	if (!pd2 || !foreign)
		return;
	errno = 0;
	CHECK(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_PD, foreign, NULL, 0, 0) ==
		      IBV_REREG_MR_ERR_INPUT && errno == EINVAL,
	      "rereg to a PD of another context -> EINVAL");
	CHECK(ibv_dealloc_pd(pd2) == 0 && (pd2 = ibv_alloc_pd(b.ctx)) != NULL,
	      "a PD no MR uses is freed");
	CHECK(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0) == 0 &&
	      b.mr->pd == pd2, "rereg to the second PD");
	CHECK(ibv_dealloc_pd(pd2) == EBUSY, "the second PD is busy now");
	CHECK(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_PD, b.pd, NULL, 0, 0) == 0,
	      "rereg back to the QP's PD");
	fill(a.buf, 4096, 3);
	CHECK(rdma(&a, IBV_WR_RDMA_WRITE, 0, 4096, raddr, b.mr->rkey) == IBV_WC_SUCCESS &&
	      !memcmp(b.buf + RX_OFF, a.buf, 4096), "WRITE after the PD round trip");
	CHECK(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0) == 0, "to pd2 again");
	CHECK(rdma(&a, IBV_WR_RDMA_WRITE, 0, 64, raddr, b.mr->rkey) == IBV_WC_REM_ACCESS_ERR,
	      "WRITE while the MR is in another PD than the QP -> REM_ACCESS_ERR");
	printf("rereg of the PD: usable after a round trip, refused while in another PD\n");
	ibv_destroy_qp(a.qp);
	ibv_destroy_qp(b.qp);
	a.qp = b.qp = NULL;
	ibv_dereg_mr(b.mr);
	b.mr = NULL;
	CHECK(ibv_dealloc_pd(pd2) == 0, "the second PD is free again after dereg");
	ibv_dealloc_pd(foreign);
	ibv_close_device(other);
	t_end_fini(&a);
	t_end_fini(&b);
}

int main(void)
{
	translation(false);
	translation(true);
	pd_move();
	printf(failures ? "FAIL (%d)\n" : "PASS\n", failures);
	return failures ? 1 : 0;
}
