/*
 * udah from C: the address to answer a RoCE v2 / IPv4 request with.
 *
 * Build:  gcc udah_example.c $(pkg-config --cflags --libs udah) -o udah-example
 *
 * A real responder is made with udah_responder_open(ctx, port, pd) on the
 * application's context and PD, and answers with udah_create_ah_from_wc();
 * this example needs no RDMA device: it gives the port's GID table itself.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <udah.h>

int main(void)
{
	/* Our port 1: RoCE v2 GID ::ffff:192.168.1.10 at index 3. */
	struct ibv_gid_entry gid = { .gid_index = 3, .port_num = 1, .gid_type = IBV_GID_TYPE_ROCE_V2 };
	const unsigned char local[4] = { 192, 168, 1, 10 }, peer[4] = { 192, 168, 1, 20 };
	struct udah_responder *r;
	struct ibv_wc wc = { .status = IBV_WC_SUCCESS, .opcode = IBV_WC_RECV, .wc_flags = IBV_WC_GRH };
	struct ibv_grh grh;
	struct ibv_ah_attr attr;
	unsigned char *ip = (unsigned char *)&grh + 20; /* IPv4 header: bytes 20..39 */
	char text[INET6_ADDRSTRLEN];

	gid.gid.raw[10] = gid.gid.raw[11] = 0xff;
	memcpy(&gid.gid.raw[12], local, 4);
	r = udah_responder_from_gids(1, IBV_LINK_LAYER_ETHERNET, 16, &gid, 1, NULL);
	if (!r) {
		perror("udah_responder_from_gids");
		return 1;
	}

	/* The request as received: 20 undefined bytes, then its IPv4 header. */
	memset(&grh, 0, sizeof(grh));
	memcpy(ip, "\x45\x00\x00\x3c\x00\x00\x40\x00\x40\x11\xb7\x42", 12);
	memcpy(ip + 12, peer, 4);
	memcpy(ip + 16, local, 4);

	if (udah_init_ah_from_wc(r, &wc, &grh, UDAH_PROFILE_LIBIBVERBS, UDAH_EVIDENCE_NONE, &attr)) {
		fprintf(stderr, "udah_init_ah_from_wc: %s\n", strerror(errno));
		return 1;
	}
	inet_ntop(AF_INET6, attr.grh.dgid.raw, text, sizeof(text));
	printf("reply to %s from sgid_index %u, hop_limit %u\n", text, attr.grh.sgid_index, attr.grh.hop_limit);
	return udah_responder_destroy(r) ? 1 : 0;
}
