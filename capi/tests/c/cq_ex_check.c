/*
 * udah-cq-ex-check: libudah's extended-CQ forms on a real device (guest
 * check 55-capi-cq-ex.sh), linked with libudah.so.
 *
 *   udah-cq-ex-check DEV PORT
 *
 * Makes a UD QP whose receive CQ is an extended CQ (ibv_create_cq_ex with
 * BYTE_LEN | QP_NUM | SRC_QP | SLID | SL | DLID_PATH_BITS) and, from every
 * RoCE v2 GID of the port, sends one datagram to itself. For each receive,
 * between ibv_start_poll and ibv_end_poll, it calls
 * udah_init_ah_from_cq_ex (libibverbs and kernel profiles) and
 * udah_create_ah_from_cq_ex, fills a struct ibv_wc from the same readers and
 * checks: udah_init_ah_from_cq_ex == udah_init_ah_from_wc == libibverbs'
 * ibv_init_ah_from_wc (return value and all 32 bytes), the kernel profile
 * the same through both forms, and udah_create_ah_from_cq_ex returns the
 * very AH udah_create_ah_from_wc returns (one deduplicated AH); then it
 * replies through that AH and receives the reply. Last, a CQ created
 * without IBV_WC_EX_WITH_SL gets EINVAL with a udah_last_error sentence
 * naming the flag. Also prints which timestamp flags the device accepts.
 *
 * Prints "cq-ex: gid N ok" per GID and "cq-ex: missing-flag ok", then
 * "cq-ex: ok N" and exits 0; or the first failure ("cq-ex: FAILED ...")
 * and exits 1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <udah.h>

#define QKEY 0x11111111u
#define SLOT 1024

#define CHECK(cond, ...)                                                                                     \
	do {                                                                                                 \
		if (!(cond)) {                                                                               \
			printf("cq-ex: FAILED at line %d: ", __LINE__);                                      \
			printf(__VA_ARGS__);                                                                 \
			printf(" (errno %s; udah_last_error: %s)\n", strerror(errno), udah_last_error());   \
			exit(1);                                                                             \
		}                                                                                            \
	} while (0)

#define UD_FIELDS                                                                                            \
	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID |     \
	 IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS)

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static char *buf;
static uint8_t port;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static struct ibv_cq_ex *cq_ex(uint64_t flags)
{
	struct ibv_cq_init_attr_ex a;
	memset(&a, 0, sizeof(a));
	a.cqe = 16;
	a.wc_flags = flags;
	return ibv_create_cq_ex(ctx, &a);
}

static struct ibv_qp *ud_qp(struct ibv_cq *scq, struct ibv_cq *rcq)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	struct ibv_qp *qp;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = scq;
	ia.recv_cq = rcq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &ia);
	CHECK(qp, "ibv_create_qp");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = port;
	a.qkey = QKEY;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), "to INIT");
	a.qp_state = IBV_QPS_RTR;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE), "to RTR");
	a.qp_state = IBV_QPS_RTS;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), "to RTS");
	return qp;
}

static void post_recv(struct ibv_qp *qp, uint64_t id)
{
	struct ibv_sge s = {(uintptr_t)buf, SLOT, mr->lkey};
	struct ibv_recv_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &s;
	wr.num_sge = 1;
	CHECK(!ibv_post_recv(qp, &wr, &bad), "ibv_post_recv");
}

static void send_to(struct ibv_qp *qp, struct ibv_cq *scq, struct ibv_ah *ah, uint32_t qpn)
{
	struct ibv_sge s = {(uintptr_t)buf + 2 * SLOT, 16, mr->lkey};
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	double end = now() + 5;
	int n;
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = QKEY;
	CHECK(!ibv_post_send(qp, &wr, &bad), "ibv_post_send");
	while ((n = ibv_poll_cq(scq, 1, &wc)) == 0 && now() < end)
		;
	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS, "send completion (n %d, status %d)", n, n == 1 ? (int)wc.status : -1);
}

/* Starts a poll of cq: returns with a current completion, or fails. */
static void start(struct ibv_cq_ex *cq)
{
	struct ibv_poll_cq_attr pa = {0};
	double end = now() + 5;
	int rc;
	while ((rc = ibv_start_poll(cq, &pa)) == ENOENT && now() < end)
		;
	CHECK(rc == 0, "ibv_start_poll returned %d", rc);
	CHECK(cq->status == IBV_WC_SUCCESS, "receive completion status %d", cq->status);
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_port_attr pattr;
	struct udah_responder *r;
	struct ibv_cq *scq;
	struct ibv_cq_ex *rcq, *nosl;
	struct ibv_qp *qp, *qp2;
	struct ibv_gid_entry e;
	const struct ibv_grh *grh;
	int i, n, tested = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: %s DEV PORT\n", argv[0]);
		return 2;
	}
	port = (uint8_t)atoi(argv[2]);
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	CHECK(ctx, "cannot open %s", argv[1]);
	CHECK(!ibv_query_port(ctx, port, &pattr), "ibv_query_port");
	pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	buf = calloc(4, SLOT);
	mr = ibv_reg_mr(pd, buf, 4 * SLOT, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "ibv_reg_mr");
	r = udah_responder_open(ctx, port, pd);
	CHECK(r, "udah_responder_open");

	{
		static const struct {
			const char *name;
			uint64_t flag;
		} ts[] = {{"IBV_WC_EX_WITH_COMPLETION_TIMESTAMP", IBV_WC_EX_WITH_COMPLETION_TIMESTAMP},
			  {"IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK", IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK}};
		for (i = 0; i < 2; i++) {
			struct ibv_cq_ex *t = cq_ex(UD_FIELDS | ts[i].flag);
			printf("cq-ex: timestamps: %s %s%s\n", ts[i].name, t ? "accepted" : "refused: ",
			       t ? "" : strerror(errno));
			if (t)
				ibv_destroy_cq(ibv_cq_ex_to_cq(t));
		}
	}

	scq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(scq, "ibv_create_cq");
	rcq = cq_ex(UD_FIELDS);
	CHECK(rcq, "ibv_create_cq_ex with the UD fields");
	qp = ud_qp(scq, ibv_cq_ex_to_cq(rcq));

	for (i = 0; i < pattr.gid_tbl_len; i++) {
		struct ibv_ah_attr to, a_ex, a_wc, a_lib, k_ex, k_wc;
		struct ibv_ah *self, *ah_ex, *ah_wc;
		struct ibv_wc wc;
		int rc_ex, rc_wc, rc_lib, rk_ex, rk_wc;

		if (ibv_query_gid_ex(ctx, port, i, &e, 0) || e.gid_type != IBV_GID_TYPE_ROCE_V2)
			continue;
		memset(&to, 0, sizeof(to));
		to.is_global = 1;
		to.port_num = port;
		to.grh.dgid = e.gid;
		to.grh.sgid_index = i;
		to.grh.hop_limit = 64;
		self = ibv_create_ah(pd, &to);
		CHECK(self, "ibv_create_ah to GID %d", i);
		post_recv(qp, 1);
		send_to(qp, scq, self, qp->qp_num);
		start(rcq);
		grh = (const struct ibv_grh *)buf;
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = rcq->wr_id;
		wc.status = rcq->status;
		wc.opcode = ibv_wc_read_opcode(rcq);
		wc.byte_len = ibv_wc_read_byte_len(rcq);
		wc.qp_num = ibv_wc_read_qp_num(rcq);
		wc.src_qp = ibv_wc_read_src_qp(rcq);
		wc.wc_flags = ibv_wc_read_wc_flags(rcq);
		wc.slid = (uint16_t)ibv_wc_read_slid(rcq);
		wc.sl = ibv_wc_read_sl(rcq);
		wc.dlid_path_bits = ibv_wc_read_dlid_path_bits(rcq);
		memset(&a_ex, 0xee, sizeof(a_ex));
		memset(&a_wc, 0x11, sizeof(a_wc));
		memset(&a_lib, 0, sizeof(a_lib));
		rc_ex = udah_init_ah_from_cq_ex(r, rcq, grh, UDAH_PROFILE_LIBIBVERBS, UDAH_EVIDENCE_NONE, &a_ex);
		rc_wc = udah_init_ah_from_wc(r, &wc, grh, UDAH_PROFILE_LIBIBVERBS, UDAH_EVIDENCE_NONE, &a_wc);
		rc_lib = ibv_init_ah_from_wc(ctx, port, &wc, (struct ibv_grh *)grh, &a_lib);
		rk_ex = udah_init_ah_from_cq_ex(r, rcq, grh, UDAH_PROFILE_KERNEL, UDAH_EVIDENCE_NONE, &k_ex);
		rk_wc = udah_init_ah_from_wc(r, &wc, grh, UDAH_PROFILE_KERNEL, UDAH_EVIDENCE_NONE, &k_wc);
		ah_ex = udah_create_ah_from_cq_ex(r, rcq, grh);
		ah_wc = udah_create_ah_from_wc(r, &wc, grh);
		ibv_end_poll(rcq);
		CHECK(rc_ex == 0 && rc_wc == 0 && rc_lib == 0, "GID %d: init returned cq_ex %d, wc %d, libibverbs %d", i,
		      rc_ex, rc_wc, rc_lib);
		CHECK(!memcmp(&a_ex, &a_wc, sizeof(a_ex)), "GID %d: cq_ex and wc forms disagree", i);
		CHECK(!memcmp(&a_ex, &a_lib, sizeof(a_ex)), "GID %d: udah and ibv_init_ah_from_wc disagree (sgid %u/%u)", i,
		      a_ex.grh.sgid_index, a_lib.grh.sgid_index);
		CHECK(rk_ex == rk_wc && !memcmp(&k_ex, &k_wc, sizeof(k_ex)), "GID %d: kernel profile: forms disagree", i);
		CHECK(ah_ex && ah_ex == ah_wc, "GID %d: create: cq_ex form %p, wc form %p", i, (void *)ah_ex, (void *)ah_wc);
		/* The reply, through the AH, comes back to us. */
		post_recv(qp, 2);
		send_to(qp, scq, ah_ex, wc.src_qp);
		start(rcq);
		CHECK(rcq->wr_id == 2 && ibv_wc_read_src_qp(rcq) == qp->qp_num, "GID %d: reply not received", i);
		ibv_end_poll(rcq);
		CHECK(!udah_destroy_ah(r, ah_ex) && !udah_destroy_ah(r, ah_wc), "udah_destroy_ah");
		CHECK(!ibv_destroy_ah(self), "ibv_destroy_ah");
		printf("cq-ex: gid %d ok (sgid_index %u, hop_limit %u)\n", i, a_ex.grh.sgid_index, a_ex.grh.hop_limit);
		tested++;
	}
	CHECK(tested > 0, "no RoCE v2 GID on port %u", port);

	/* A CQ without IBV_WC_EX_WITH_SL: EINVAL naming the flag. */
	nosl = cq_ex(UD_FIELDS & ~IBV_WC_EX_WITH_SL);
	CHECK(nosl, "ibv_create_cq_ex without SL");
	qp2 = ud_qp(scq, ibv_cq_ex_to_cq(nosl));
	{
		struct ibv_ah_attr a;
		struct ibv_ah *ah;
		int rc, err;
		CHECK(!ibv_query_gid_ex(ctx, port, 1, &e, 0) || !ibv_query_gid_ex(ctx, port, 0, &e, 0), "a GID");
		memset(&a, 0, sizeof(a));
		a.is_global = 1;
		a.port_num = port;
		a.grh.dgid = e.gid;
		a.grh.sgid_index = e.gid_index;
		a.grh.hop_limit = 64;
		ah = ibv_create_ah(pd, &a);
		CHECK(ah, "ibv_create_ah");
		post_recv(qp2, 3);
		send_to(qp, scq, ah, qp2->qp_num);
		start(nosl);
		rc = udah_init_ah_from_cq_ex(r, nosl, (const struct ibv_grh *)buf, UDAH_PROFILE_LIBIBVERBS,
					     UDAH_EVIDENCE_NONE, &a);
		err = errno;
		CHECK(rc == -1 && err == EINVAL && strstr(udah_last_error(), "IBV_WC_EX_WITH_SL"),
		      "init without SL: rc %d errno %d", rc, err);
		errno = 0;
		CHECK(!udah_create_ah_from_cq_ex(r, nosl, (const struct ibv_grh *)buf) && errno == EINVAL,
		      "create without SL");
		ibv_end_poll(nosl);
		printf("cq-ex: missing-flag ok (%s)\n", udah_last_error());
		ibv_destroy_ah(ah);
	}
	CHECK(!ibv_destroy_qp(qp2) && !ibv_destroy_qp(qp), "ibv_destroy_qp");
	CHECK(!ibv_destroy_cq(ibv_cq_ex_to_cq(nosl)) && !ibv_destroy_cq(ibv_cq_ex_to_cq(rcq)), "ibv_destroy_cq");
	CHECK(!udah_responder_destroy(r), "udah_responder_destroy");
	ibv_destroy_cq(scq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	printf("cq-ex: ok %d\n", tested);
	return 0;
}
