/*
 * C test of libudah against the shared libibverbs vectors.
 *
 * stdin: one case per line, written by tests/c_api.rs from the JSON vectors:
 *   name port link_layer gid_tbl_len n_gids {index gid_hex type}*n_gids
 *   wc_flags slid sl dlid_path_bits src_qp pkey_index grh_hex|-
 *   expect_ret expect_errno expect_attr_hex(64 digits: the 32-byte image)
 * For each case it builds a responder with udah_responder_from_gids, calls
 * udah_init_ah_from_wc (libibverbs profile, no evidence) on a struct ibv_wc
 * and struct ibv_grh, and compares the return value, errno (when -1) and the
 * whole struct ibv_ah_attr byte for byte. Prints "FAIL name: ..." per
 * mismatch and "N passed, M failed" at the end; exits 1 on any failure.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <udah.h>
#include "layout.h" /* _Static_asserts of the Rust mirrors (generated) */

static int hex(const char *s, unsigned char *out, size_t n)
{
	size_t i;

	if (strlen(s) != 2 * n)
		return -1;
	for (i = 0; i < n; i++) {
		unsigned int b;

		if (sscanf(s + 2 * i, "%2x", &b) != 1)
			return -1;
		out[i] = (unsigned char)b;
	}
	return 0;
}

static void put_hex(const unsigned char *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		printf("%02x", b[i]);
}

#define MAXG 1024

int main(void)
{
	static struct ibv_gid_entry gids[MAXG];
	char line[1 << 16];
	unsigned long passed = 0, failed = 0, lineno = 0;

	while (fgets(line, sizeof(line), stdin)) {
		char name[256], grh_hex[128], attr_hex[128], gid_hex[64];
		unsigned int port, ll, len, n, i, wc_flags, slid, sl, dpb, src_qp, pkey;
		int exp_ret, exp_errno, off, pos = 0, ret, err;
		struct ibv_wc wc;
		struct ibv_grh grh;
		struct ibv_ah_attr got, want;
		struct udah_responder *r;
		const char *p = line;

		lineno++;
		if (sscanf(p, "%255s %u %u %u %u%n", name, &port, &ll, &len, &n, &off) != 5 || n > MAXG) {
			printf("FAIL line %lu: unparsable\n", lineno);
			failed++;
			continue;
		}
		pos += off;
		for (i = 0; i < n; i++) {
			unsigned int idx, ty;

			if (sscanf(p + pos, "%u %63s %u%n", &idx, gid_hex, &ty, &off) != 3 ||
			    hex(gid_hex, gids[i].gid.raw, 16)) {
				printf("FAIL %s: bad gid %u\n", name, i);
				failed++;
				goto next;
			}
			pos += off;
			gids[i].gid_index = idx;
			gids[i].gid_type = ty;
			gids[i].port_num = port;
			gids[i].ndev_ifindex = 0;
		}
		if (sscanf(p + pos, "%u %u %u %u %u %u %127s %d %d %127s", &wc_flags, &slid, &sl, &dpb, &src_qp,
			   &pkey, grh_hex, &exp_ret, &exp_errno, attr_hex) != 10 ||
		    hex(attr_hex, (unsigned char *)&want, sizeof(want))) {
			printf("FAIL %s: unparsable tail\n", name);
			failed++;
			continue;
		}
		memset(&wc, 0, sizeof(wc));
		wc.status = IBV_WC_SUCCESS;
		wc.opcode = IBV_WC_RECV;
		wc.wc_flags = wc_flags;
		wc.slid = (uint16_t)slid;
		wc.sl = (uint8_t)sl;
		wc.dlid_path_bits = (uint8_t)dpb;
		wc.src_qp = src_qp;
		wc.pkey_index = (uint16_t)pkey;
		if (strcmp(grh_hex, "-") && hex(grh_hex, (unsigned char *)&grh, sizeof(grh))) {
			printf("FAIL %s: bad grh\n", name);
			failed++;
			continue;
		}
		r = udah_responder_from_gids((uint8_t)port, (uint8_t)ll, len, gids, n, NULL);
		if (!r) {
			printf("FAIL %s: udah_responder_from_gids: %s\n", name, strerror(errno));
			failed++;
			continue;
		}
		memset(&got, 0xa5, sizeof(got)); /* udah must write all 32 bytes */
		errno = 0;
		ret = udah_init_ah_from_wc(r, &wc, strcmp(grh_hex, "-") ? &grh : NULL, UDAH_PROFILE_LIBIBVERBS,
					   UDAH_EVIDENCE_NONE, &got);
		err = errno;
		if (ret != exp_ret || (ret != 0 && err != exp_errno) || memcmp(&got, &want, sizeof(got))) {
			printf("FAIL %s: ret %d (want %d) errno %d (want %d) attr ", name, ret, exp_ret, err,
			       exp_errno);
			put_hex((unsigned char *)&got, sizeof(got));
			printf(" want ");
			put_hex((unsigned char *)&want, sizeof(want));
			printf("\n");
			failed++;
		} else {
			passed++;
		}
		if (udah_responder_destroy(r)) {
			printf("FAIL %s: udah_responder_destroy: %s\n", name, strerror(errno));
			failed++;
		}
next:;
	}
	printf("%lu passed, %lu failed\n", passed, failed);
	return failed || !passed ? 1 : 0;
}
