/*
 * udah-events-check: libudah's configuration and network events on a real
 * device (guest check 51-capi-events.sh), linked with libudah.so.
 *
 *   udah-events-check DEV PORT NETDEV LOCAL_IPV4 PEER_IPV4
 *
 * Opens DEV with udah_responder_open_ex (65536 AH slots, an allow-list of
 * LOCAL's /16), gives PEER a permanent neighbour entry on NETDEV, creates
 * the AH to PEER through the responder, and checks through
 * udah_responder_event_fd / udah_responder_process_events that: replacing
 * the entry with the same MAC retires nothing; changing its MAC retires
 * exactly that AH (udah_ah_is_current says 0, the handle stays valid until
 * given back) and not an AH to another peer; the next request gets a new
 * AH; a completion from outside the allow-list is refused with EACCES.
 * Prints one "PASS name" or "FAIL name: why" line per verdict.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <udah.h>

static int failed;

static void verdict(const char *name, int ok, const char *why)
{
	if (ok) {
		printf("PASS %s\n", name);
	} else {
		printf("FAIL %s: %s (errno %s; %s)\n", name, why, strerror(errno), udah_last_error());
		failed = 1;
	}
}

static int sh(const char *fmt, const char *a, const char *b, const char *c)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, fmt, a, b, c);
	printf("$ %s\n", cmd);
	fflush(stdout);
	return system(cmd);
}

static void mapped(union ibv_gid *g, struct in_addr ip)
{
	memset(g, 0, sizeof *g);
	g->raw[10] = 0xff;
	g->raw[11] = 0xff;
	memcpy(&g->raw[12], &ip, 4);
}

/* Waits up to 5 s for the event fd, then processes what waits; returns the
 * number of events read, or -1. */
static int wait_events(struct udah_responder *r, int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int total = 0, n;
	if (poll(&p, 1, 5000) < 0)
		return -1;
	/* Events come in bursts: read until a short quiet spell. */
	do {
		n = udah_responder_process_events(r);
		if (n < 0)
			return -1;
		total += n;
	} while (poll(&p, 1, 200) > 0);
	return total;
}

static struct udah_stats stats(struct udah_responder *r)
{
	struct udah_stats s;
	memset(&s, 0, sizeof s);
	udah_responder_stats_ex(r, &s, sizeof s);
	return s;
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd;
	struct udah_responder *r;
	struct udah_config cfg;
	struct udah_gid_prefix allow;
	struct ibv_ah_attr attr;
	struct ibv_ah *peer, *other, *again;
	struct ibv_wc wc;
	struct ibv_grh grh;
	struct in_addr local, peer_ip, other_ip, stranger;
	union ibv_gid gid, want;
	unsigned char *h = (unsigned char *)&grh + 20;
	int i, n, fd, sgid = -1, ok;
	uint8_t port;

	if (argc != 6 || !inet_pton(AF_INET, argv[4], &local) || !inet_pton(AF_INET, argv[5], &peer_ip)) {
		fprintf(stderr, "usage: %s DEV PORT NETDEV LOCAL_IPV4 PEER_IPV4\n", argv[0]);
		return 2;
	}
	port = (uint8_t)atoi(argv[2]);
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx || !(pd = ibv_alloc_pd(ctx))) {
		verdict("events-open", 0, "cannot open the device or allocate a PD");
		return 1;
	}
	mapped(&want, local);
	for (i = 0; i < 1024 && sgid < 0; i++)
		if (!ibv_query_gid(ctx, port, i, &gid) && !memcmp(&gid, &want, sizeof gid))
			sgid = i;

	memset(&cfg, 0, sizeof cfg);
	memset(&allow, 0, sizeof allow);
	mapped((union ibv_gid *)allow.raw, local);
	allow.len = 96 + 16;
	cfg.size = sizeof cfg;
	cfg.ah_slots = 65536;
	cfg.n_allow = 1;
	cfg.allow = &allow;
	r = udah_responder_open_ex(ctx, port, pd, &cfg);
	verdict("events-open", r && sgid >= 0 && stats(r).ah_slots == 65536,
		"udah_responder_open_ex with 65536 AH slots, or the local IPv4 GID not found");
	if (!r || sgid < 0)
		return 1;

	/* A completion from a stranger (outside LOCAL/16) is refused. */
	memset(&wc, 0, sizeof wc);
	memset(&grh, 0, sizeof grh);
	wc.wc_flags = IBV_WC_GRH;
	inet_pton(AF_INET, "203.0.113.9", &stranger);
	h[0] = 0x45, h[3] = 60, h[8] = 64, h[9] = 17;
	memcpy(h + 12, &stranger, 4);
	memcpy(h + 16, &local, 4);
	errno = 0;
	verdict("events-allow-list", !udah_create_ah_from_wc(r, &wc, &grh) && errno == EACCES && stats(r).refused == 1,
		"a stranger's completion was not refused with EACCES");

	fd = udah_responder_event_fd(r);
	verdict("events-fd", fd >= 0 && udah_responder_event_fd(r) == fd, "udah_responder_event_fd");
	if (fd < 0)
		return 1;
	/* The neighbour-table dump, whatever it holds. */
	wait_events(r, fd);

	other_ip = peer_ip;
	((unsigned char *)&other_ip)[3] ^= 1;
	if (sh("ip neigh replace %s lladdr 02:00:5e:00:00:01 dev %s nud permanent%s", argv[5], argv[3], "") ||
	    sh("ip neigh replace %s lladdr 02:00:5e:00:00:02 dev %s nud permanent%s", inet_ntoa(other_ip), argv[3], "")) {
		verdict("events-neigh", 0, "ip neigh replace failed");
		return 1;
	}
	wait_events(r, fd);

	memset(&attr, 0, sizeof attr);
	attr.is_global = 1;
	attr.port_num = port;
	attr.grh.sgid_index = (uint8_t)sgid;
	attr.grh.hop_limit = 64;
	mapped(&attr.grh.dgid, peer_ip);
	peer = udah_create_ah(r, &attr);
	mapped(&attr.grh.dgid, other_ip);
	other = udah_create_ah(r, &attr);
	verdict("events-create", peer && other && peer != other && stats(r).kernel_ahs_created == 2,
		"two AHs on a 65536-slot responder");
	if (!peer || !other)
		return 1;

	/* The same MAC again: nothing retired. */
	sh("ip neigh replace %s lladdr 02:00:5e:00:00:01 dev %s nud permanent%s", argv[5], argv[3], "");
	wait_events(r, fd);
	verdict("events-same-mac", stats(r).retired_by_events == 0 && udah_ah_is_current(r, peer) == 1,
		"a neighbour refresh with the same MAC retired an AH");

	/* The peer moves: its AH only. */
	sh("ip neigh replace %s lladdr 02:00:5e:00:00:99 dev %s nud permanent%s", argv[5], argv[3], "");
	n = wait_events(r, fd);
	ok = n > 0 && stats(r).mac_changes >= 1 && stats(r).retired_by_events == 1;
	verdict("events-mac-change", ok && udah_ah_is_current(r, peer) == 0 && udah_ah_is_current(r, other) == 1,
		"a MAC change did not retire exactly the moved peer's AH");
	mapped(&attr.grh.dgid, peer_ip);
	again = udah_create_ah(r, &attr);
	verdict("events-new-ah", again && again != peer && udah_ah_is_current(r, again) == 1,
		"the next request did not get a new AH");
	printf("events: read %d, stats net_events %llu mac_changes %llu retired_by_events %llu\n", n,
	       (unsigned long long)stats(r).net_events, (unsigned long long)stats(r).mac_changes,
	       (unsigned long long)stats(r).retired_by_events);

	/* The held, retired handle is still valid until given back. */
	ok = !udah_destroy_ah(r, peer) && !udah_destroy_ah(r, other) && (!again || !udah_destroy_ah(r, again));
	ok = ok && !udah_responder_destroy(r);
	verdict("events-give-back", ok && !ibv_dealloc_pd(pd), "giving the AHs back and destroying the responder");
	sh("ip neigh del %s dev %s%s", argv[5], argv[3], "");
	sh("ip neigh del %s dev %s%s", inet_ntoa(other_ip), argv[3], "");
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return failed;
}
