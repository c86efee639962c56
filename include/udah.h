/*
 * udah.h: address handles from RDMA UD work completions (libudah).
 *
 * GENERATED from capi/src/lib.rs by cbindgen (capi/cbindgen.toml): do not
 * edit; regenerate with
 *   UDAH_BLESS_HEADER=1 cargo test -p udah-capi --test header
 *
 * Link: pkg-config --cflags --libs udah   (needs libibverbs)
 *
 * Conventions (libibverbs'): int functions return 0 (or a count) on success
 * and -1 with errno on failure; pointer functions return NULL with errno.
 * Every function is thread safe: one responder may be used from any number
 * of threads at once (destroy it from one thread, when no other uses it).
 *
 * The libibverbs structs are the ones of <infiniband/verbs.h>, passed as the
 * application already has them.
 */

#ifndef UDAH_H
#define UDAH_H



#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>
/* Nonzero when this header is version maj.min.patch or later, e.g.
 *   #if UDAH_CHECK_VERSION(0, 2, 0) ... #endif */
#define UDAH_CHECK_VERSION(maj, min, patch) \
  (UDAH_VERSION_MAJOR > (maj) || \
   (UDAH_VERSION_MAJOR == (maj) && (UDAH_VERSION_MINOR > (min) || \
    (UDAH_VERSION_MINOR == (min) && UDAH_VERSION_PATCH >= (patch)))))

// The major version of this header (the `0` of soname `libudah.so.0`).
// The unit tests check it, with the minor and patch, against the crate
// version and `udah_version()`.
#define UDAH_VERSION_MAJOR 0

// The minor version of this header.
#define UDAH_VERSION_MINOR 1

// The patch version of this header.
#define UDAH_VERSION_PATCH 0

// Profile: libibverbs' `ibv_init_ah_from_wc` (rdma-core 44), bit-exact.
#define UDAH_PROFILE_LIBIBVERBS 0

// Profile: the Linux kernel's `ib_init_ah_attr_from_wc` (exact GID types;
// the route hop limit is left to the kernel at create time and reads 255).
#define UDAH_PROFILE_KERNEL 1

// Evidence: none; the profile's own header heuristic (bit-exact).
#define UDAH_EVIDENCE_NONE 0

// Evidence: the packet is known to be an InfiniBand GRH.
#define UDAH_EVIDENCE_IB 1

// Evidence: the packet is known to be RoCE v1.
#define UDAH_EVIDENCE_ROCE_V1 2

// Evidence: the packet is known to be RoCE v2 over IPv4.
#define UDAH_EVIDENCE_IPV4 3

// Evidence: the packet is known to be RoCE v2 over IPv6.
#define UDAH_EVIDENCE_IPV6 4

// A responder: one port's GID-table snapshot, the AH profiles, and a
// deduplicating cache of AHs on one protection domain. Opaque; thread safe.
struct udah_responder;

// A source-GID prefix of `udah_config.allow`: the GIDs whose first `len`
// bits (0 to 128) are `raw`'s. An IPv4 subnet `a.b.c.d/n` is the
// IPv4-mapped GID `::ffff:a.b.c.d` with `len` 96 + n.
struct udah_gid_prefix {
  // The GID, network byte order (as `union ibv_gid`'s `raw`).
  uint8_t raw[16];
  // The prefix length in bits.
  uint32_t len;
};

// Options of `udah_responder_open_ex`. Set `size` to
// `sizeof(struct udah_config)`: the library reads only the first `size`
// bytes (a caller compiled against an older, shorter struct gets the
// defaults for the fields it lacks), and fields are only ever appended.
struct udah_config {
  // `sizeof(struct udah_config)` as the caller compiled it; at least 8
  // (this field and `ah_slots`).
  uint32_t size;
  // AH-table slots: 0 for 1024, else a power of two up to 2²¹
  // (2097152), rounded up to the next capacity the library is built for
  // (1024, 4096, 16384, 65536, 262144, 1048576, 2097152); the slots are
  // allocated at open (64 bytes each). `udah_stats.ah_slots` tells the
  // capacity in use. A table stays below about 98 % full before it
  // evicts an AH nobody holds.
  uint32_t ah_slots;
  // GID-snapshot slots: 0 for the port's `gid_tbl_len`. This release
  // validates it (at most 1024) and snapshots up to 1024 slots (a larger
  // port table is `E2BIG`).
  uint32_t gid_slots;
  // Reserved: validated (any value) but not yet used.
  uint32_t max_pending_per_peer;
  // Reserved: validated (any value) but not yet used.
  uint32_t max_pending_total;
  // How many entries `allow` has (at most 8); 0 admits every source.
  uint32_t n_allow;
  // The admission allow-list: only completions whose source GID lies in
  // one of these prefixes may create an AH (or take one from the cache)
  // through `udah_create_ah_from_wc` and `udah_create_ah_batch`; the
  // others fail with `EACCES` and create nothing, evict nothing.
  // `udah_init_ah_from_wc` and `udah_create_ah` (the application's own
  // attribute) are not filtered. Read at open only (may be freed after).
  const struct udah_gid_prefix *allow;
};

// Counters of a responder (`udah_responder_stats`).
struct udah_stats {
  // `udah_init_ah_from_wc` calls.
  uint64_t init_calls;
  // Of which returned -1.
  uint64_t init_failures;
  // AH requests (`udah_create_ah_from_wc`, `udah_create_ah`, batch entries).
  uint64_t create_calls;
  // Of which returned NULL.
  uint64_t create_failures;
  // `udah_destroy_ah` calls.
  uint64_t destroy_calls;
  // AH requests served by an AH that already existed (shared).
  uint64_t ah_hits;
  // Kernel AHs created (`ibv_create_ah`).
  uint64_t kernel_ahs_created;
  // Kernel AHs destroyed.
  uint64_t kernel_ahs_destroyed;
  // Kernel AHs alive now (handed out, or cached for reuse).
  uint64_t kernel_ahs_live;
  // AH references handed out and not yet given back.
  uint64_t ahs_outstanding;
  // Asynchronous events passed to `udah_handle_async_event`.
  uint64_t events;
  // GID-table snapshots re-read.
  uint64_t refreshes;
  // Re-reads that failed (the previous snapshot stays in use).
  uint64_t refresh_failures;
  // Generation of the snapshot in use (1 for the first).
  uint64_t gid_generation;
  // The AH table's capacity (`udah_config.ah_slots`, rounded up).
  // `udah_stats_ex` only (as every field below): `udah_responder_stats`
  // writes the fields above.
  uint64_t ah_slots;
  // Network events read by `udah_responder_process_events`.
  uint64_t net_events;
  // Of which a neighbour now resolving to another MAC.
  uint64_t mac_changes;
  // AHs retired because their destination's MAC changed (handles out
  // stay valid until given back; `udah_ah_is_current` says 0).
  uint64_t retired_by_events;
  // AH requests from completions refused by `udah_config.allow`.
  uint64_t refused;
};

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// Creates a responder for port `port_num` of the application's context
// `context`, whose AHs are created on `pd` (the PD of the QP that sends
// with them; may be NULL to only compute attributes). Both are borrowed:
// udah never closes or frees them, and they must outlive the responder.
// Reads the port's GID table once (`ibv_query_port`, then one
// `ibv_query_gid_ex` per slot); pass every `ibv_async_event` to
// `udah_handle_async_event` so that it is re-read on a change.
//
// Returns NULL with errno: `EINVAL` (NULL context), `E2BIG` (more than 1024
// GID slots), or the errno of the failed query.
//
// # Safety
// `context` must be a live `ibv_context` and `pd` NULL or a live PD of it,
// both outliving the responder.
struct udah_responder *udah_responder_open(struct ibv_context *context, uint8_t port_num, struct ibv_pd *pd);

// Creates a responder from an explicit GID table (for tests, or a caller
// with its own GID source): port `port_num`, `link_layer` as
// `enum ibv_port_link_layer` (`IBV_LINK_LAYER_ETHERNET` or InfiniBand),
// `gid_tbl_len` slots of which the `n_gids` entries of `gids` are the valid
// ones (`gid_index` and `gid_type` are read; every other slot is empty).
// `pd` may be NULL (attributes only). `udah_handle_async_event` cannot
// refresh such a responder (`EOPNOTSUPP`).
//
// Returns NULL with errno (and a `udah_last_error` sentence), checked
// before anything is allocated: `EINVAL` (port 0, a link layer other than
// 0, 1 or 2, `n_gids` above `gid_tbl_len`, NULL `gids` with `n_gids` > 0,
// an index at or above `gid_tbl_len`, an unknown type, a zero GID),
// `EEXIST` (an index twice), `E2BIG` (`gid_tbl_len` above 1024).
//
// # Safety
// `gids` must point to `n_gids` entries (or be NULL when `n_gids` is 0);
// `pd` must be NULL or a live PD that outlives the responder.
struct udah_responder *udah_responder_from_gids(uint8_t port_num, uint8_t link_layer, uint32_t gid_tbl_len, const struct ibv_gid_entry *gids, size_t n_gids, struct ibv_pd *pd);

// `udah_responder_from_gids` with options (`cfg` may be NULL for the
// defaults; `gid_slots` is not used: the table is `gid_tbl_len` long).
// Returns NULL with errno as `udah_responder_from_gids`, and `EINVAL` or
// `E2BIG` for a bad `cfg` as `udah_responder_open_ex`.
//
// # Safety
// As `udah_responder_from_gids`; `cfg` must be NULL or valid for reads of
// `cfg->size` bytes.
struct udah_responder *udah_responder_from_gids_ex(uint8_t port_num, uint8_t link_layer, uint32_t gid_tbl_len, const struct ibv_gid_entry *gids, size_t n_gids, struct ibv_pd *pd, const struct udah_config *cfg);

// `udah_responder_open` with options (`cfg` may be NULL for the defaults).
// Returns NULL with errno: `EINVAL` (`cfg->size` below 8, a bad
// `ah_slots`, NULL context), `E2BIG` (`gid_slots` or the port's table above
// 1024), or the errno of the failed query; `udah_last_error` says which.
//
// # Safety
// As `udah_responder_open`; `cfg` must be NULL or valid for reads of
// `cfg->size` bytes.
struct udah_responder *udah_responder_open_ex(struct ibv_context *context, uint8_t port_num, struct ibv_pd *pd, const struct udah_config *cfg);

// Destroys a responder and every AH it still caches. Returns -1 with
// `EBUSY` (and destroys nothing) while AHs it handed out have not been
// given back with `udah_destroy_ah`, `EINVAL` for NULL.
//
// # Safety
// `r` must be NULL or a responder not yet destroyed, used by no other thread
// during the call nor afterwards.
int udah_responder_destroy(struct udah_responder *r);

// `ibv_init_ah_from_wc` for the responder's port: fills `ah_attr` from the
// completion `wc` and the 40 bytes `grh` in front of its payload. With
// `UDAH_PROFILE_LIBIBVERBS` and `UDAH_EVIDENCE_NONE` the result is
// bit-exact with libibverbs 44, including what it leaves in `ah_attr` on
// failure, in a few nanoseconds instead of two system calls per GID slot.
// `UDAH_PROFILE_KERNEL` reproduces the kernel's rules instead; an
// `UDAH_EVIDENCE_*` other than NONE gives the header type and replaces the
// heuristic.
//
// Returns 0, or -1 with errno: `EINVAL` (multicast destination, local GID
// not found, bad argument), `EPROTONOSUPPORT` (no IPv4/IPv6/GRH header,
// unknown next header), `EPROTO` (evidence contradicts the header),
// `ENOENT`, `EPROTOTYPE` or `ENODATA` (kernel profile), `EFAULT` (NULL
// `grh`: libibverbs would crash; `ah_attr` is zeroed).
//
// # Safety
// `r` must be a live responder; `wc`, `grh` (or NULL) and `ah_attr` must be
// valid for reads / writes of their structs.
int udah_init_ah_from_wc(struct udah_responder *r, const struct ibv_wc *wc, const struct ibv_grh *grh, uint32_t profile, uint32_t evidence, struct ibv_ah_attr *ah_attr);

// `ibv_create_ah_from_wc` on the responder's PD, deduplicated: the
// attribute is computed as `udah_init_ah_from_wc` does (libibverbs profile),
// and completions that give the same attribute share one kernel AH
// (`ibv_create_ah` once; later calls take a reference, without a system
// call). Every AH returned must be given back with `udah_destroy_ah` (not
// `ibv_destroy_ah`), once per return.
//
// Returns NULL with errno: as `udah_init_ah_from_wc`, `EINVAL` also for a
// responder without PD or an SL above 15, `ENOMEM` (cache full of AHs in
// use), or `ibv_create_ah`'s errno.
//
// # Safety
// `r` must be a live responder; `wc` and `grh` must be valid for reads.
struct ibv_ah *udah_create_ah_from_wc(struct udah_responder *r, const struct ibv_wc *wc, const struct ibv_grh *grh);

// `ibv_create_ah` on the responder's PD, deduplicated like
// `udah_create_ah_from_wc` (for attributes from the kernel profile or the
// application). Give it back with `udah_destroy_ah`.
//
// # Safety
// `r` must be a live responder; `ah_attr` must be valid for reads.
struct ibv_ah *udah_create_ah(struct udah_responder *r, const struct ibv_ah_attr *ah_attr);

// Gives back one reference to an AH from `udah_create_ah_from_wc`,
// `udah_create_ah` or `udah_create_ah_batch`. The kernel AH stays cached for
// reuse while the responder lives (destroyed with it, or when its GID
// changes), so destroy the responder before deallocating its PD.
//
// Returns 0, or -1 with `EINVAL` for an AH this responder did not hand out
// (or has already been given back as many times as it was handed out).
//
// # Safety
// `r` must be a live responder. `ah` is only compared, never dereferenced.
int udah_destroy_ah(struct udah_responder *r, struct ibv_ah *ah);

// Whether an AH this responder handed out (and that has not been given
// back) is still the current AH of its peer. A retired AH (its GID changed
// or its entry was replaced) stays valid until given back with
// `udah_destroy_ah`; a holder that sees 0 can ask for a new one.
//
// Returns 1 (current), 0 (retired), or -1 with `EINVAL` for a NULL
// responder or an AH this responder has not out.
//
// # Safety
// `r` must be NULL or a live responder. `ah` is only compared, never
// dereferenced.
int udah_ah_is_current(struct udah_responder *r, struct ibv_ah *ah);

// `udah_create_ah_from_wc` for a polled CQ array: `wcs[i]` with the 40
// bytes at `grhs[i]`, for i < `n`. `ahs[i]` receives the AH or NULL; when
// `errnos` is not NULL, `errnos[i]` receives 0 or the errno of entry i.
// Completions whose status is not `IBV_WC_SUCCESS` get NULL and `EINVAL`.
//
// Returns the number of AHs created (give each back with
// `udah_destroy_ah`), or -1 with `EINVAL` for a NULL array or a negative
// `n`, or a NULL responder (also when `n` is 0).
//
// # Safety
// `r` must be a live responder; `wcs`, `grhs` and `ahs` (and `errnos` when
// not NULL) must hold `n` elements; each `grhs[i]` must be valid for reads
// (or NULL, which gives `EFAULT` for that entry).
int udah_create_ah_batch(struct udah_responder *r, const struct ibv_wc *wcs, const struct ibv_grh *const *grhs, int n, struct ibv_ah **ahs, int *errnos);

// Tells the responder about an asynchronous event the application read
// with `ibv_get_async_event` (call it before `ibv_ack_async_event`). On
// `IBV_EVENT_GID_CHANGE`, a port, LID, P_Key or SM event, or a client
// re-register, of the responder's port, the GID table is re-read and AHs
// built on a changed entry are retired (new requests get fresh AHs; AHs
// already handed out stay valid until given back).
//
// Returns 1 when the snapshot was re-read, 0 when the event does not
// concern it, or -1 with errno (`EOPNOTSUPP` for a responder made with
// `udah_responder_from_gids`, or the failed query's errno; the previous
// snapshot then stays in use).
//
// # Safety
// `r` must be a live responder and `event` valid for reads.
int udah_handle_async_event(struct udah_responder *r, const struct ibv_async_event *event);

// A file descriptor that becomes readable when network events that can
// make the responder's AHs stale wait (a neighbour's MAC, a local MAC or
// address changed): add it to `poll`/`epoll`, and call
// `udah_responder_process_events` when it is readable. For programs
// without an event loop of their own; the context's asynchronous events
// stay the application's (pass them to `udah_handle_async_event`).
//
// The first call opens it (an rtnetlink socket, which then asks the kernel
// for its neighbour table, so that a peer resolved before it opened is
// known); later calls return the same descriptor, which the responder owns
// and closes when destroyed (do not close it). Returns the descriptor, or
// -1 with errno (`EINVAL` for a NULL responder, or the socket's errno).
//
// # Safety
// `r` must be NULL or a live responder.
int udah_responder_event_fd(struct udah_responder *r);

// Reads every network event waiting on `udah_responder_event_fd` (never
// blocks) and applies it: a neighbour whose MAC changed has its AHs
// retired (only those; the same MAC, or a first sighting, retires
// nothing; handles out stay valid until given back, and
// `udah_ah_is_current` says 0 for them); a local MAC or address change
// re-reads the GID table. Returns the number of events read (0 when none,
// or before the first `udah_responder_event_fd`), or -1 with errno:
// `EINVAL` for a NULL responder, `ENOBUFS` when the kernel dropped events
// (the ones read were applied; a MAC change may have been lost, so an
// application that cannot miss one re-creates the AHs it holds).
//
// # Safety
// `r` must be NULL or a live responder.
int udah_responder_process_events(struct udah_responder *r);

// Re-reads the GID table now (what `udah_handle_async_event` does on a GID
// change). Returns 0, or -1 with errno as `udah_handle_async_event`.
//
// # Safety
// `r` must be a live responder.
int udah_responder_refresh(struct udah_responder *r);

// Copies the responder's first 14 counters (the struct as version 0.1
// defined it, up to `gid_generation`) into `stats`; later counters need
// `udah_responder_stats_ex`. Returns 0, or -1 with `EINVAL` for a NULL
// argument.
//
// # Safety
// `r` must be a live responder and `stats` valid for writes.
int udah_responder_stats(const struct udah_responder *r, struct udah_stats *stats);

// `udah_responder_stats` for a caller that passes the size of its
// `struct udah_stats` (`sizeof(struct udah_stats)` as it was compiled):
// the first `size` bytes of the counters are written (an older, shorter
// struct gets the counters it has; counters are only ever appended), at
// most `sizeof(struct udah_stats)`. Returns 0, or -1 with `EINVAL` for a
// NULL argument or a `size` that is not a multiple of 8.
//
// # Safety
// `r` must be a live responder and `stats` valid for writes of `size`
// bytes.
int udah_responder_stats_ex(const struct udah_responder *r, struct udah_stats *stats, size_t size);

// A sentence describing the last failure of a udah call in the calling
// thread (for a person, not to be parsed), e.g. "GID table has 2048 slots,
// above the responder's 1024"; an empty string before any failure. The
// pointer stays valid until this thread's next failing udah call. A caught
// internal panic is reported as `ENOTRECOVERABLE` with its message here.
const char *udah_last_error(void);

// The library version, `"MAJOR.MINOR.PATCH"` (static storage).
const char *udah_version(void);

// `udah_init_ah_from_wc` on the completion an extended CQ holds now:
// call it between `ibv_start_poll` (or `ibv_next_poll`) returning 0 and
// `ibv_end_poll`. The fields `struct ibv_wc` would carry are read with
// `ibv_wc_read_wc_flags`, `_slid`, `_sl`, `_dlid_path_bits` (and `_src_qp`
// when present), so the result is bit for bit that of
// `udah_init_ah_from_wc` on the same completion polled with
// `ibv_poll_cq`.
//
// The CQ must be created (`ibv_create_cq_ex`) with `wc_flags` including
// `IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS`;
// without one of them (its read function is NULL) the call fails with
// `EINVAL` and `udah_last_error` names the flag.
//
// Returns 0, or -1 with errno as `udah_init_ah_from_wc`.
//
// # Safety
// `r` must be a live responder; `cq` NULL or a live extended CQ with a
// current completion; `grh` (or NULL) and `ah_attr` valid for reads /
// writes of their structs.
int udah_init_ah_from_cq_ex(struct udah_responder *r, struct ibv_cq_ex *cq, const struct ibv_grh *grh, uint32_t profile, uint32_t evidence, struct ibv_ah_attr *ah_attr);

// `udah_create_ah_from_wc` on the completion an extended CQ holds now
// (call it as `udah_init_ah_from_cq_ex`, with the same `wc_flags`
// requirement and `EINVAL`): the same deduplicated AH the `ibv_wc` form
// returns for the same completion. Give it back with `udah_destroy_ah`.
//
// Returns NULL with errno as `udah_create_ah_from_wc`.
//
// # Safety
// `r` must be a live responder; `cq` NULL or a live extended CQ with a
// current completion; `grh` valid for reads.
struct ibv_ah *udah_create_ah_from_cq_ex(struct udah_responder *r, struct ibv_cq_ex *cq, const struct ibv_grh *grh);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* UDAH_H */
