/*
 * The libibverbs verbs that udah calls on a context the application owns,
 * compiled against the installed <infiniband/verbs.h> so that its static
 * inline functions (ibv_query_port, ibv_query_gid_ex) are libibverbs' own:
 * they go through the context's ops exactly as the application's calls do.
 */
#include <errno.h>
#include <string.h>
#include <infiniband/verbs.h>

/* 0, or the errno value. */
__attribute__((visibility("hidden"))) int udah_shim_query_port(struct ibv_context *ctx, uint8_t port,
			 uint32_t *gid_tbl_len, uint8_t *link_layer)
{
	struct ibv_port_attr attr;
	int rc;

	memset(&attr, 0, sizeof(attr));
	errno = 0;
	rc = ibv_query_port(ctx, port, &attr);
	if (rc)
		return rc > 0 ? rc : (errno ? errno : EIO);
	*gid_tbl_len = (uint32_t)attr.gid_tbl_len;
	*link_layer = attr.link_layer;
	return 0;
}

/* One GID-table entry: 0 (entry filled), ENODATA (empty slot), or the
 * errno value of the failed query (EINVAL past the end of the table). */
__attribute__((visibility("hidden"))) int udah_shim_query_gid(struct ibv_context *ctx, uint8_t port, uint32_t index,
			uint8_t gid[16], uint32_t *gid_type, uint32_t *ifindex)
{
	struct ibv_gid_entry e;
	int rc;

	memset(&e, 0, sizeof(e));
	errno = 0;
	rc = ibv_query_gid_ex(ctx, port, index, &e, 0);
	if (rc)
		return rc > 0 ? rc : (errno ? errno : EIO);
	memcpy(gid, e.gid.raw, 16);
	*gid_type = e.gid_type;
	*ifindex = e.ndev_ifindex;
	return 0;
}

__attribute__((visibility("hidden"))) struct ibv_ah *udah_shim_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	return ibv_create_ah(pd, attr);
}

__attribute__((visibility("hidden"))) int udah_shim_destroy_ah(struct ibv_ah *ah)
{
	return ibv_destroy_ah(ah);
}
