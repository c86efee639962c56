/*
 * libudah-fakeverbs.so: just enough of libibverbs for udah on a machine
 * without an RDMA device (capi/check-fork.sh, capi/check-sanitizers.sh).
 * Loaded with LD_PRELOAD (after libudah-preload.so when that is tested), it
 * defines, at libibverbs' own symbol versions (fake_verbs.map):
 *   ibv_create_ah, ibv_destroy_ah     a heap `struct ibv_ah` per create,
 *                                     freed by destroy (a destroy of an AH it
 *                                     did not create, or a second destroy, is
 *                                     counted as bad and fails with EINVAL);
 *   _ibv_query_gid_ex                 the table below;
 *   ibv_init_ah_from_wc, ibv_create_ah_from_wc
 *                                     fail with ENOSYS (udah must not need
 *                                     them: the preload falls back to them).
 * The fake PD (udah_fake_verbs_pd) is on a fake extended context whose
 * query_port op answers for port 1 (RoCE, 4 GID slots). The preload finds
 * these with dlvsym(RTLD_NEXT, ..., "IBVERBS_1.1"), libudah's calls bind to
 * them because a preloaded library comes before libibverbs.
 *
 * Port 1's GID table: 0 fe80::1 RoCE v1, 1 fe80::1 RoCE v2,
 * 2 ::ffff:192.0.2.1 RoCE v2, 3 empty.
 */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#define FAKE_MAGIC 0x75646168u
#define FAKE_SLOTS 4

struct fake_ah {
	struct ibv_ah ah;
	_Atomic unsigned magic;
};

static atomic_ulong created, destroyed, bad;
/* Incremented by every create once its AH is filled in, read by every
 * destroy before it touches the AH: the happens-before edge from a create
 * to a destroy in another thread. The program hands the AH over through
 * udah's own locks, which ThreadSanitizer does not see (libudah and the
 * preload are not instrumented), so without this it would report the
 * fake's calloc and free as a race. */
static atomic_ulong published;
static struct verbs_context vctx;
static struct ibv_pd fake_pd;

static int fake_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr, size_t len)
{
	if (ctx != &vctx.context || port != 1)
		return EINVAL;
	memset(attr, 0, len < sizeof(*attr) ? len : sizeof(*attr));
	attr->state = IBV_PORT_ACTIVE;
	attr->max_mtu = attr->active_mtu = IBV_MTU_1024;
	attr->gid_tbl_len = FAKE_SLOTS;
	attr->pkey_tbl_len = 1;
	attr->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}

struct ibv_pd *udah_fake_verbs_pd(void);
struct ibv_pd *udah_fake_verbs_pd(void)
{
	vctx.sz = sizeof(vctx);
	vctx.query_port = fake_query_port;
	vctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	fake_pd.context = &vctx.context;
	fake_pd.handle = 1;
	return &fake_pd;
}

/* AHs created, destroyed, and destroys of something that was not a live
 * fake AH. */
void udah_fake_verbs_counts(unsigned long *c, unsigned long *d, unsigned long *b);
void udah_fake_verbs_counts(unsigned long *c, unsigned long *d, unsigned long *b)
{
	*c = atomic_load(&created);
	*d = atomic_load(&destroyed);
	*b = atomic_load(&bad);
}

int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index, struct ibv_gid_entry *entry,
		      uint32_t flags, size_t entry_size)
{
	if (ctx != &vctx.context || port != 1 || flags || entry_size < sizeof(*entry))
		return EINVAL;
	if (index >= FAKE_SLOTS)
		return EINVAL;
	if (index == 3)
		return ENODATA;
	memset(entry, 0, sizeof(*entry));
	if (index < 2) {
		entry->gid.raw[0] = 0xfe;
		entry->gid.raw[1] = 0x80;
		entry->gid.raw[15] = 1;
	} else {
		entry->gid.raw[10] = entry->gid.raw[11] = 0xff;
		entry->gid.raw[12] = 192;
		entry->gid.raw[13] = 0;
		entry->gid.raw[14] = 2;
		entry->gid.raw[15] = 1;
	}
	entry->gid_index = index;
	entry->port_num = port;
	entry->gid_type = index == 0 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_ROCE_V2;
	entry->ndev_ifindex = 2;
	return 0;
}

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct fake_ah *f;

	if (pd != &fake_pd || !attr || attr->port_num != 1 || (attr->is_global && attr->grh.sgid_index >= FAKE_SLOTS)) {
		errno = EINVAL;
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		errno = ENOMEM;
		return NULL;
	}
	/* A system call's worth of scheduling: other threads (and fork) get a
	 * chance to run while the caller is inside the create. */
	sched_yield();
	f->ah.context = pd->context;
	f->ah.pd = pd;
	f->ah.handle = (uint32_t)atomic_fetch_add(&created, 1);
	atomic_init(&f->magic, FAKE_MAGIC);
	atomic_fetch_add(&published, 1);
	return &f->ah;
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
	struct fake_ah *f = (struct fake_ah *)ah;
	unsigned want = FAKE_MAGIC;

	(void)atomic_load(&published);
	if (!ah || ah->pd != &fake_pd || !atomic_compare_exchange_strong(&f->magic, &want, 0)) {
		atomic_fetch_add(&bad, 1);
		errno = EINVAL;
		return EINVAL;
	}
	sched_yield();
	atomic_fetch_add(&destroyed, 1);
	free(f);
	return 0;
}

int ibv_init_ah_from_wc(struct ibv_context *ctx, uint8_t port, struct ibv_wc *wc, struct ibv_grh *grh,
			struct ibv_ah_attr *attr)
{
	(void)ctx, (void)port, (void)wc, (void)grh, (void)attr;
	errno = ENOSYS;
	return -1;
}

struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh, uint8_t port)
{
	(void)pd, (void)wc, (void)grh, (void)port;
	errno = ENOSYS;
	return NULL;
}
