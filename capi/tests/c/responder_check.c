/*
 * udah-capi-check: the C API on a real device (guest check
 * 50-udaddy-preload.sh, verdict capi-responder), linked with libudah.so.
 *
 *   udah-capi-check DEV PORT LOCAL_IPV4 N
 *
 * Opens DEV, allocates a PD, makes a responder on it, asks N times for the
 * AH answering a RoCE v2 / IPv4 request from LOCAL to LOCAL (loopback), and
 * checks: every AH is the same one, one kernel AH was created, N-1 requests
 * were served by it, udah_init_ah_from_wc agrees with libibverbs'
 * ibv_init_ah_from_wc byte for byte, a batch of 4 gives 4 more references,
 * an IBV_EVENT_GID_CHANGE re-reads the table, destroying the responder with
 * AHs outstanding is refused (EBUSY), and after every AH is given back it
 * is destroyed. Prints "capi-responder: ok ..." and exits 0, or prints the
 * first failure and exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <udah.h>

#define CHECK(cond, ...)                                                                                     \
	do {                                                                                                 \
		if (!(cond)) {                                                                               \
			printf("capi-responder: FAILED at line %d: ", __LINE__);                             \
			printf(__VA_ARGS__);                                                                 \
			printf(" (errno %s)\n", strerror(errno));                                            \
			exit(1);                                                                             \
		}                                                                                            \
	} while (0)

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd;
	struct udah_responder *r;
	struct udah_stats st;
	struct ibv_wc wc, wcs[4];
	struct ibv_grh grh;
	const struct ibv_grh *grhs[4];
	struct ibv_ah_attr mine, theirs;
	struct ibv_ah *first, **ahs, *batch[4];
	struct ibv_async_event ev;
	struct in_addr ip;
	unsigned char *h = (unsigned char *)&grh + 20;
	int i, n, count;
	uint8_t port;

	if (argc != 5 || !inet_pton(AF_INET, argv[3], &ip) || (count = atoi(argv[4])) < 2) {
		fprintf(stderr, "usage: %s DEV PORT LOCAL_IPV4 N(>=2)\n", argv[0]);
		return 2;
	}
	port = (uint8_t)atoi(argv[2]);
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	CHECK(ctx, "cannot open %s", argv[1]);
	pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	r = udah_responder_open(ctx, port, pd);
	CHECK(r, "udah_responder_open");

	memset(&grh, 0, sizeof(grh));
	h[0] = 0x45, h[3] = 60, h[8] = 64, h[9] = 17;
	memcpy(h + 12, &ip, 4);
	memcpy(h + 16, &ip, 4);
	memset(&wc, 0, sizeof(wc));
	wc.status = IBV_WC_SUCCESS;
	wc.opcode = IBV_WC_RECV;
	wc.wc_flags = IBV_WC_GRH;

	CHECK(udah_init_ah_from_wc(r, &wc, &grh, UDAH_PROFILE_LIBIBVERBS, UDAH_EVIDENCE_NONE, &mine) == 0,
	      "udah_init_ah_from_wc");
	CHECK(ibv_init_ah_from_wc(ctx, port, &wc, &grh, &theirs) == 0, "ibv_init_ah_from_wc");
	CHECK(!memcmp(&mine, &theirs, sizeof(mine)), "udah and libibverbs disagree (sgid_index %u vs %u)",
	      mine.grh.sgid_index, theirs.grh.sgid_index);

	ahs = calloc((size_t)count, sizeof(*ahs));
	CHECK(ahs, "calloc");
	for (i = 0; i < count; i++) {
		ahs[i] = udah_create_ah_from_wc(r, &wc, &grh);
		CHECK(ahs[i], "udah_create_ah_from_wc #%d", i);
	}
	first = ahs[0];
	for (i = 1; i < count; i++)
		CHECK(ahs[i] == first, "AH #%d differs", i);
	for (i = 0; i < 4; i++) {
		wcs[i] = wc;
		grhs[i] = &grh;
	}
	CHECK(udah_create_ah_batch(r, wcs, grhs, 4, batch, NULL) == 4, "udah_create_ah_batch");
	CHECK(udah_responder_stats(r, &st) == 0, "udah_responder_stats");
	CHECK(st.kernel_ahs_created == 1 && st.ah_hits == (uint64_t)count + 3 && st.ahs_outstanding == (uint64_t)count + 4,
	      "stats: %llu kernel AHs, %llu hits, %llu outstanding", (unsigned long long)st.kernel_ahs_created,
	      (unsigned long long)st.ah_hits, (unsigned long long)st.ahs_outstanding);

	memset(&ev, 0, sizeof(ev));
	ev.event_type = IBV_EVENT_GID_CHANGE;
	ev.element.port_num = port;
	CHECK(udah_handle_async_event(r, &ev) == 1, "udah_handle_async_event(GID_CHANGE)");
	ev.element.port_num = port + 1;
	CHECK(udah_handle_async_event(r, &ev) == 0, "an event of another port refreshed");

	errno = 0;
	CHECK(udah_responder_destroy(r) == -1 && errno == EBUSY, "destroy with AHs outstanding was not refused");
	for (i = 0; i < count; i++)
		CHECK(udah_destroy_ah(r, ahs[i]) == 0, "udah_destroy_ah #%d", i);
	for (i = 0; i < 4; i++)
		CHECK(udah_destroy_ah(r, batch[i]) == 0, "udah_destroy_ah batch #%d", i);
	errno = 0;
	CHECK(udah_destroy_ah(r, first) == -1 && errno == EINVAL, "an extra destroy was accepted");
	CHECK(udah_responder_stats(r, &st) == 0 && st.refreshes == 1 && st.ahs_outstanding == 0, "stats after");
	printf("capi-responder: ok: %d requests + batch of 4 -> %llu kernel AH, sgid_index %u, gid generation %llu\n",
	       count, (unsigned long long)st.kernel_ahs_created, mine.grh.sgid_index,
	       (unsigned long long)st.gid_generation);
	CHECK(udah_responder_destroy(r) == 0, "udah_responder_destroy");
	CHECK(ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd after the responder (no AH left on the PD)");
	free(ahs);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
