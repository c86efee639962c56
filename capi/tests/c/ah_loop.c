/*
 * udah-ah-loop: ibv_create_ah_from_wc / ibv_init_ah_from_wc on a real
 * device, for the Soft-RoCE guest check 5x-udaddy-preload.sh. Plain
 * libibverbs: run it with and without LD_PRELOAD=libudah-preload.so.
 *
 *   udah-ah-loop DEV PORT bench N SRC_IPV4 DST_IPV4
 *       N x (ibv_create_ah_from_wc + ibv_destroy_ah) for a RoCE v2 / IPv4
 *       request from SRC to our DST, twice: with no AH held ("fresh") and
 *       while one AH for the same peer is held ("held", the server pattern
 *       of answering a peer that already has an AH). Prints ns per
 *       iteration of each.
 *   udah-ah-loop DEV PORT watch SECONDS DST_IPV4
 *       ibv_init_ah_from_wc in a loop for SECONDS for a request to DST (the
 *       check adds and deletes DST meanwhile); after each success the
 *       returned sgid_index is read back with ibv_query_gid_ex: it must
 *       hold ::ffff:DST as RoCE v2. "stale" counts answers whose slot holds
 *       another address; "raced" those whose slot was empty by the time it
 *       was read back (the address was deleted after the call returned).
 *       Every 64th call also makes and destroys an AH.
 *
 * Exit status 0 when every call behaved, 1 otherwise, 2 on usage/setup.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void request(struct ibv_grh *grh, struct ibv_wc *wc, struct in_addr src, struct in_addr dst)
{
	unsigned char *ip = (unsigned char *)grh + 20;

	memset(grh, 0, sizeof(*grh));
	ip[0] = 0x45; /* version 4, IHL 5: libibverbs' IPv4 branch */
	ip[3] = 60;
	ip[8] = 64; /* TTL */
	ip[9] = 17; /* UDP */
	memcpy(ip + 12, &src, 4);
	memcpy(ip + 16, &dst, 4);
	memset(wc, 0, sizeof(*wc));
	wc->status = IBV_WC_SUCCESS;
	wc->opcode = IBV_WC_RECV;
	wc->wc_flags = IBV_WC_GRH;
}

static double loop(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh, uint8_t port, long n)
{
	double t0 = now_ns();
	long i;

	for (i = 0; i < n; i++) {
		struct ibv_ah *ah = ibv_create_ah_from_wc(pd, wc, grh, port);

		if (!ah) {
			fprintf(stderr, "ibv_create_ah_from_wc: %s\n", strerror(errno));
			exit(1);
		}
		if (ibv_destroy_ah(ah)) {
			fprintf(stderr, "ibv_destroy_ah: %s\n", strerror(errno));
			exit(1);
		}
	}
	return (now_ns() - t0) / (double)n;
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd;
	struct ibv_wc wc;
	struct ibv_grh grh;
	struct in_addr src, dst;
	uint8_t port;
	int i, n;

	if (argc < 6 || (strcmp(argv[3], "bench") && strcmp(argv[3], "watch")) ||
	    (!strcmp(argv[3], "bench") && argc != 7)) {
		fprintf(stderr, "usage: %s DEV PORT bench N SRC DST | DEV PORT watch SECONDS DST\n", argv[0]);
		return 2;
	}
	port = (uint8_t)atoi(argv[2]);
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "cannot open %s\n", argv[1]);
		return 2;
	}
	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		perror("ibv_alloc_pd");
		return 2;
	}

	if (!strcmp(argv[3], "bench")) {
		long iters = atol(argv[4]);
		struct ibv_ah *held;
		double fresh, kept;

		if (iters <= 0 || !inet_pton(AF_INET, argv[5], &src) || !inet_pton(AF_INET, argv[6], &dst))
			return 2;
		request(&grh, &wc, src, dst);
		loop(pd, &wc, &grh, port, iters / 10 + 1); /* warm up */
		fresh = loop(pd, &wc, &grh, port, iters);
		held = ibv_create_ah_from_wc(pd, &wc, &grh, port);
		if (!held) {
			perror("ibv_create_ah_from_wc");
			return 1;
		}
		kept = loop(pd, &wc, &grh, port, iters);
		ibv_destroy_ah(held);
		printf("bench: %ld iterations, fresh %.0f ns/iter, held %.0f ns/iter\n", iters, fresh, kept);
	} else {
		double end = now_ns() + atof(argv[4]) * 1e9;
		unsigned long calls = 0, ok = 0, refused = 0, stale = 0, raced = 0, ahs = 0;
		union ibv_gid want;

		if (!inet_pton(AF_INET, argv[5], &dst))
			return 2;
		inet_pton(AF_INET, "127.0.0.1", &src);
		request(&grh, &wc, src, dst);
		memset(&want, 0, sizeof(want));
		want.raw[10] = want.raw[11] = 0xff;
		memcpy(&want.raw[12], &dst, 4);
		while (now_ns() < end) {
			struct ibv_ah_attr attr;
			struct ibv_gid_entry e;
			int rc;

			calls++;
			if (ibv_init_ah_from_wc(ctx, port, &wc, &grh, &attr)) {
				refused++;
				continue;
			}
			rc = ibv_query_gid_ex(ctx, port, attr.grh.sgid_index, &e, 0);
			if (rc == 0 && !memcmp(e.gid.raw, want.raw, 16) && e.gid_type == IBV_GID_TYPE_ROCE_V2) {
				ok++;
			} else if (rc == 0) {
				stale++;
				fprintf(stderr, "stale: index %u holds another GID\n", attr.grh.sgid_index);
			} else {
				raced++;
			}
			if (calls % 64 == 0) {
				struct ibv_ah *ah = ibv_create_ah_from_wc(pd, &wc, &grh, port);

				if (ah) {
					ahs++;
					ibv_destroy_ah(ah);
				}
			}
		}
		printf("watch: %lu calls, ok %lu, refused %lu, stale %lu, raced %lu, ahs %lu\n", calls, ok, refused,
		       stale, raced, ahs);
		if (stale)
			return 1;
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
