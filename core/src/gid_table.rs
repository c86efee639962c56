//! [`GidTable`]: a fixed-capacity snapshot of one port's GID table with O(1)
//! look-ups that return exactly the index each C search would return.
//!
//! libibverbs finds the local GID with one `ibv_query_gid` plus one
//! `ibv_query_gid_type` per table index, from 0 upward, until a match or a
//! failing query: two system calls per entry, 60 on average over the public
//! test corpus. The kernel walks its GID cache under a lock. Both return the
//! **lowest** matching index. `GidTable` keeps the table in arrays sized by a
//! const generic (it can live in a `static`) and keeps, per hash bucket and
//! type class (IB/RoCE v1, RoCE v2), a chain of the non-empty slots in
//! ascending index order. A look-up hashes the GID, walks one chain and
//! returns the first slot that passes the profile's filter, which is
//! therefore the lowest such index. Chains hold at most one slot on
//! average (there are `N` buckets per class for at most `N` slots), plus
//! the duplicates of the GID (one per type and VLAN), whatever the table
//! size. Each chain's first slot is copied beside its head, so
//! that a look-up whose GID is there (most of them) reads one record, and
//! walks the chain only otherwise.
//!
//! The profile-specific rules:
//!
//! | | [`find_libibverbs`](GidTable::find_libibverbs) | [`find_kernel`](GidTable::find_kernel) |
//! |---|---|---|
//! | type | two classes: IB and RoCE v1 together, RoCE v2 | exact (IB, RoCE v1, RoCE v2) |
//! | empty slots | read as (zero GID, class v1): a zero GID searched as v1 matches the first empty slot | skipped |
//! | VLAN | ignored | must equal the wanted VLAN (RoCE), or ignored (IB) |
//! | port | a port other than the table's makes the first query fail | the caller picks the table |
//!
//! The snapshot carries a generation number: a backend that rebuilds the
//! table after a GID-change event bumps it, so that AHs built against the old
//! table can be retired.

use crate::error::GidTableError;
use crate::wire::Gid;

/// `enum ib_gid_type` / `IB_UVERBS_GID_TYPE_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum GidType {
    /// InfiniBand.
    Ib = 0,
    /// RoCE v1.
    RoceV1 = 1,
    /// RoCE v2 (`IB_GID_TYPE_ROCE_UDP_ENCAP`).
    RoceV2 = 2,
}

impl GidType {
    /// The type of a raw `ib_uverbs_gid_type` value.
    pub const fn from_raw(v: u32) -> Option<GidType> {
        match v {
            0 => Some(GidType::Ib),
            1 => Some(GidType::RoceV1),
            2 => Some(GidType::RoceV2),
            _ => None,
        }
    }
}

/// What kind of port the table belongs to (decides the kernel profile's path
/// and the `type` of its attribute).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkLayer {
    /// An InfiniBand port.
    Infiniband,
    /// An Ethernet port speaking RoCE (v1 and/or v2).
    Ethernet,
    /// An InfiniBand port with the OPA address-handle capability.
    Opa,
}

/// One valid GID-table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GidEntry {
    /// The GID.
    pub gid: Gid,
    /// Its type.
    pub gid_type: GidType,
    /// The VLAN id of the entry's netdev (or of the VLAN device beneath it),
    /// as the kernel's `rdma_read_gid_l2_fields` reports it; `None` when the
    /// netdev is not on a VLAN. Always `None` on InfiniBand ports.
    pub vlan: Option<u16>,
    /// The netdev's interface index (0 when none or unknown).
    pub ifindex: u32,
}

impl GidEntry {
    /// An untagged entry without a known netdev.
    pub const fn new(gid: Gid, gid_type: GidType) -> GidEntry {
        GidEntry { gid, gid_type, vlan: None, ifindex: 0 }
    }

    /// The same entry on VLAN `vlan`.
    pub const fn with_vlan(self, vlan: u16) -> GidEntry {
        GidEntry { vlan: Some(vlan), ..self }
    }

    /// The same entry with netdev interface index `ifindex`.
    pub const fn with_ifindex(self, ifindex: u32) -> GidEntry {
        GidEntry { ifindex, ..self }
    }
}

/// Index sentinel of the chains.
const NIL: u16 = u16::MAX;
/// `Slot::ty` of a RoCE v2 entry.
const TY_ROCE_V2: u8 = GidType::RoceV2 as u8 + 1;
/// "No VLAN", as the kernel reports it.
const NO_VLAN: u16 = 0xffff;

/// A GID as a chain key: its two 8-byte halves in memory order. (The
/// chains are per type class, so the key carries no class: a v1 and a v2
/// entry of one GID share a bucket but not a chain.)
#[inline(always)]
fn key_of(gid: &[u8; 16]) -> [u64; 2] {
    let v = u128::from_le_bytes(*gid);
    [v as u64, (v >> 64) as u64]
}

/// The head of a chain: its first slot's key, type and VLAN, copied from
/// the slot, and its index. A look-up compares the first slot here and
/// goes on to the slots only when it does not match; the lowest index of
/// the chain that matches is the lowest of the table, so a match here is
/// the answer. An empty chain's head ([`vacant`]) holds a key that no
/// search of its bucket can carry. Aligned to 32 bytes (from 24): a head's
/// offset is then a shift of its index, one instruction fewer per look-up,
/// for 64 bytes of heads per entry (two classes of `N` buckets: 16 KiB at
/// 256 entries; with `2N` buckets the heads took twice that, and a
/// `Responder` with two snapshots of 1,024 entries overflowed a 2 MiB test
/// thread's stack in an unoptimised build).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(32))]
struct Head {
    /// The first slot's [`Slot::key`].
    key: [u64; 2],
    /// The first slot's index, or [`NIL`].
    idx: u16,
    /// The second slot's index (the first slot's [`Slot::next`]), or
    /// [`NIL`]: a look-up that does not end here reads that slot first.
    next: u16,
    /// The first slot's [`Slot::vlan`].
    vlan: u16,
    /// The first slot's [`Slot::ty`] (0 for an empty chain).
    ty: u8,
}

impl Head {
    /// The head of a chain whose first slot is `s`, at index `idx`.
    #[inline(always)]
    const fn of(idx: u16, s: &Slot) -> Head {
        Head { key: s.key, idx, next: s.next, vlan: s.vlan, ty: s.ty }
    }
}

/// The head of an empty chain of bucket `b` (of `buckets`): its key is
/// one whose bucket is another, so no search that reaches this head can
/// match it (every key, also the zero GID's, has exactly one bucket).
const fn vacant(b: usize, buckets: usize) -> Head {
    // Zero hashes to bucket 0; for bucket 0 the first small key of
    // another bucket (with at least two buckets there is one).
    let mut key = [0u64; 2];
    if b == 0 {
        let mut x = 1u64;
        while bucket_of([x, 0], buckets) == 0 {
            x = x.wrapping_add(1);
        }
        key = [x, 0];
    }
    Head { key, idx: NIL, next: NIL, vlan: NO_VLAN, ty: 0 }
}

/// The bucket of a GID's [key](key_of) among `buckets` (below 2^17).
#[inline(always)]
const fn bucket_of(key: [u64; 2], buckets: usize) -> usize {
    // A folded multiply (as in foldhash): every input bit reaches the
    // top bits, including the address bits of an IPv4-mapped GID, which
    // all sit in the top half of the second word.
    let m = ((key[0] ^ key[1]) as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let h = ((m as u64) ^ ((m >> 64) as u64)) >> 32;
    // Lemire's multiply-shift range reduction: h < 2^32, buckets < 2^17.
    ((h.wrapping_mul(buckets as u64)) >> 32) as usize
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    /// The GID ([`key_of`]).
    key: [u64; 2],
    /// 0 = empty, else `GidType as u8 + 1`.
    ty: u8,
    vlan: u16,
    /// The next slot of this slot's chain (here, so that a search reads one
    /// cache line per step), or [`NIL`]. A chain holds one type class.
    next: u16,
}

impl Slot {
    /// The GID.
    #[inline]
    fn gid(&self) -> Gid {
        let [lo, hi] = self.key;
        Gid(((u128::from(hi) << 64) | u128::from(lo)).to_le_bytes())
    }

    /// Whether the entry is RoCE v2 (the class `find_libibverbs` compares).
    #[inline(always)]
    fn v2(&self) -> bool {
        self.ty == TY_ROCE_V2
    }

    const EMPTY: Slot = Slot { key: [0; 2], ty: 0, vlan: NO_VLAN, next: NIL };
}

/// A snapshot of one port's GID table, with capacity `N` slots.
///
/// `N` may be smaller than the table length the device reports
/// (`gid_tbl_len`): slots at or above `N` are then empty (a backend refuses to
/// snapshot a table whose valid entries do not fit). `N` must be between 2 and
/// 65534 (a table of one slot has one bucket, and an empty chain's head
/// needs a key of another bucket).
///
/// The layout is fixed (`repr(C)`) so that what a search reads comes first:
/// the port and the multicast count, then the chain heads (a search that
/// finds its GID in the head reads nothing else), then the slots.
#[derive(Clone)]
#[repr(C)]
pub struct GidTable<const N: usize> {
    port_num: u8,
    link_layer: LinkLayer,
    /// Entries whose GID is multicast ([`Gid::is_multicast_any`]).
    multicast: u32,
    /// Lowest empty index below `len`, or `u32::MAX`.
    first_empty: u32,
    len: u32,
    live: u32,
    generation: u64,
    /// Chain heads: `N` buckets (load factor at most one) of two classes,
    /// the head of bucket `b` and class `v2` at `2b + v2`
    /// ([`GidTable::head`]).
    heads: [[Head; 2]; N],
    slots: [Slot; N],
    /// Netdev interface index per slot (cold: only [`GidTable::get`]).
    ifindex: [u32; N],
}

impl<const N: usize> core::fmt::Debug for GidTable<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GidTable")
            .field("port_num", &self.port_num)
            .field("link_layer", &self.link_layer)
            .field("len", &self.len)
            .field("generation", &self.generation)
            .field("entries", &self.live)
            .finish_non_exhaustive()
    }
}

impl<const N: usize> GidTable<N> {
    /// An empty table of length `len` for port `port_num`.
    pub const fn new(port_num: u8, link_layer: LinkLayer, len: u32) -> GidTable<N> {
        const { assert!(N > 1 && N < NIL as usize, "GidTable capacity must be 2..=65534") };
        GidTable {
            port_num,
            link_layer,
            len,
            generation: 0,
            live: 0,
            multicast: 0,
            first_empty: if len > 0 { 0 } else { u32::MAX },
            slots: [Slot::EMPTY; N],
            heads: Self::vacant_heads(),
            ifindex: [0; N],
        }
    }

    /// The port number.
    pub const fn port_num(&self) -> u8 {
        self.port_num
    }

    /// The port's link layer.
    pub const fn link_layer(&self) -> LinkLayer {
        self.link_layer
    }

    /// The table length (`gid_tbl_len`): queries at or above it fail.
    pub const fn len(&self) -> u32 {
        self.len
    }

    /// Whether the table has no slots at all.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The capacity `N`.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// The number of valid entries.
    pub const fn entries(&self) -> u32 {
        self.live
    }

    /// The generation number of this snapshot.
    pub const fn generation(&self) -> u64 {
        self.generation
    }

    /// Sets the generation number (a backend bumps it on every rebuild).
    pub fn set_generation(&mut self, generation: u64) {
        self.generation = generation;
    }

    /// The bucket of a GID's [key](key_of): one of `N`.
    #[inline(always)]
    const fn bucket(key: [u64; 2]) -> usize {
        bucket_of(key, N)
    }

    /// Where the head of the chain of `key` (bucket) and `v2` (class) is,
    /// in the flattened [`GidTable::heads`].
    #[inline(always)]
    const fn head_at(key: [u64; 2], v2: bool) -> usize {
        (Self::bucket(key) << 1) | v2 as usize
    }

    /// The head of the chain of `key` and `v2` (`None` never happens: the
    /// bucket is in range).
    #[inline(always)]
    fn head(&self, key: [u64; 2], v2: bool) -> Option<&Head> {
        self.heads.as_flattened().get(Self::head_at(key, v2))
    }

    /// Every chain empty.
    const fn vacant_heads() -> [[Head; 2]; N] {
        let mut heads = [[vacant(1, N); 2]; N];
        // Bucket 0's two heads (classes v1 and v2) are the first two.
        if let Some([v1, v2]) = heads.first_mut() {
            *v1 = vacant(0, N);
            *v2 = vacant(0, N);
        }
        heads
    }

    /// Stores `entry` at `index`, replacing what was there.
    pub fn set(&mut self, index: u32, entry: GidEntry) -> Result<(), GidTableError> {
        if index >= self.len {
            return Err(GidTableError::IndexOutOfRange { index, len: self.len });
        }
        let i = index as usize;
        if i >= N {
            return Err(GidTableError::OverCapacity { index, capacity: N });
        }
        if entry.gid == Gid::ZERO {
            return Err(GidTableError::ZeroGid);
        }
        if let Some(v) = entry.vlan.filter(|v| *v > 4095) {
            return Err(GidTableError::InvalidVlan(v));
        }
        self.unlink(i);
        if let Some(s) = self.slots.get_mut(i) {
            *s = Slot {
                key: key_of(&entry.gid.0),
                ty: (entry.gid_type as u8).wrapping_add(1),
                vlan: entry.vlan.unwrap_or(NO_VLAN),
                next: NIL,
            };
        }
        if let Some(x) = self.ifindex.get_mut(i) {
            *x = entry.ifindex;
        }
        self.link(i);
        self.live = self.live.wrapping_add(1);
        self.multicast = self.multicast.wrapping_add(u32::from(entry.gid.is_multicast_any()));
        self.recompute_first_empty();
        Ok(())
    }

    /// Empties the slot at `index` (no-op if it is empty or out of range).
    pub fn clear(&mut self, index: u32) {
        let i = index as usize;
        if index < self.len && i < N {
            self.unlink(i);
            self.recompute_first_empty();
        }
    }

    /// Empties every slot, keeping port, length and generation.
    pub fn clear_all(&mut self) {
        self.slots = [Slot::EMPTY; N];
        self.heads = Self::vacant_heads();
        self.ifindex = [0; N];
        self.live = 0;
        self.multicast = 0;
        self.recompute_first_empty();
    }

    /// Removes slot `i` from its chain if it is occupied, and marks it empty.
    fn unlink(&mut self, i: usize) {
        let Some(slot) = self.slots.get(i).copied() else { return };
        if slot.ty == 0 {
            return;
        }
        let at = Self::head_at(slot.key, slot.v2());
        let mut prev: Option<usize> = None;
        let first = self.heads.as_flattened().get(at).map_or(NIL, |h| h.idx);
        let mut cur = first;
        while cur != NIL {
            if usize::from(cur) == i {
                match prev {
                    None => self.set_head(at, slot.next),
                    Some(p) => {
                        if let Some(n) = self.slots.get_mut(p).map(|s| &mut s.next) {
                            *n = slot.next;
                        }
                        // The head copies the first slot's `next`.
                        self.set_head(at, first);
                    }
                }
                break;
            }
            prev = Some(usize::from(cur));
            cur = self.slots.get(usize::from(cur)).map_or(NIL, |s| s.next);
        }
        if let Some(s) = self.slots.get_mut(i) {
            *s = Slot::EMPTY;
        }
        self.live = self.live.saturating_sub(1);
        self.multicast = self.multicast.saturating_sub(u32::from(slot.gid().is_multicast_any()));
    }

    /// Inserts occupied slot `i` into its chain, keeping ascending order.
    fn link(&mut self, i: usize) {
        let Some(slot) = self.slots.get(i).copied() else { return };
        let at = Self::head_at(slot.key, slot.v2());
        let idx = i as u16;
        let mut prev: Option<usize> = None;
        let first = self.heads.as_flattened().get(at).map_or(NIL, |h| h.idx);
        let mut cur = first;
        while cur != NIL && cur < idx {
            prev = Some(usize::from(cur));
            cur = self.slots.get(usize::from(cur)).map_or(NIL, |s| s.next);
        }
        if let Some(n) = self.slots.get_mut(i).map(|s| &mut s.next) {
            *n = cur;
        }
        match prev {
            None => self.set_head(at, idx),
            Some(p) => {
                if let Some(n) = self.slots.get_mut(p).map(|s| &mut s.next) {
                    *n = idx;
                }
                // The head copies the first slot's `next`.
                self.set_head(at, first);
            }
        }
    }

    /// Makes slot `first` (or nothing, [`NIL`]) the first of the chain whose
    /// head is at `at`, copying it into the head (again after a change
    /// behind it: the head holds the first slot's `next`).
    fn set_head(&mut self, at: usize, first: u16) {
        let head = match self.slots.get(usize::from(first)) {
            Some(s) => Head::of(first, s),
            None => vacant(at >> 1, N),
        };
        if let Some(h) = self.heads.as_flattened_mut().get_mut(at) {
            *h = head;
        }
    }

    fn recompute_first_empty(&mut self) {
        let within = (self.len as usize).min(N);
        let found = self.slots.iter().take(within).position(|s| s.ty == 0);
        self.first_empty = match found {
            Some(i) => i as u32,
            // Slots in N..len exist on the device but not in the snapshot: empty.
            None if (self.len as usize) > N => N as u32,
            None => u32::MAX,
        };
    }

    /// The entry at `index`, or `None` for an empty or out-of-range slot.
    pub fn get(&self, index: u32) -> Option<GidEntry> {
        let s = self.slots.get(index as usize).filter(|s| s.ty != 0 && index < self.len)?;
        Some(GidEntry {
            gid: s.gid(),
            gid_type: GidType::from_raw(u32::from(s.ty.wrapping_sub(1)))?,
            vlan: (s.vlan != NO_VLAN).then_some(s.vlan),
            ifindex: self.ifindex.get(index as usize).copied().unwrap_or(0),
        })
    }

    /// The valid entries with their indices, in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, GidEntry)> + '_ {
        (0..(self.len as usize).min(N) as u32).filter_map(|i| self.get(i).map(|e| (i, e)))
    }

    /// The occupied slots whose [key](key_of) is `key` and whose class is `v2`,
    /// in ascending index order (the chain `key` and `v2` hash to, filtered).
    #[inline(always)]
    fn chain(&self, key: [u64; 2], v2: bool) -> impl Iterator<Item = (u32, &Slot)> + '_ {
        self.chain_from(self.head(key, v2).map_or(NIL, |h| h.idx), key)
    }

    /// The slots of a chain from slot `first` on whose key is `key`.
    #[inline(always)]
    fn chain_from(&self, first: u16, key: [u64; 2]) -> impl Iterator<Item = (u32, &Slot)> + '_ {
        let mut cur = first;
        core::iter::from_fn(move || {
            let i = cur;
            let s = self.slots.get(usize::from(i))?;
            cur = s.next;
            Some((u32::from(i), s))
        })
        .filter(move |(_, s)| s.key == key)
    }

    /// The rest of a look-up whose chain's slots before `next` did not
    /// pass: the lowest slot from `next` on with key `key` that passes
    /// `pass`.
    #[inline(always)]
    fn walk(&self, next: u16, key: [u64; 2], pass: impl Fn(&Slot) -> bool) -> Option<u32> {
        self.chain_from(next, key).find(|(_, s)| pass(s)).map(|(i, _)| i)
    }

    /// Whether some entry's GID is multicast ([`Gid::is_multicast_any`]:
    /// `ff00::/8`, or IPv4-mapped in `224.0.0.0/4`). A port's real table
    /// never has one; when none is here, a multicast destination can never
    /// be found, so a search for one fails like libibverbs' multicast test,
    /// and the hot path leaves that test to its slow path.
    #[inline(always)]
    pub(crate) const fn holds_multicast(&self) -> bool {
        self.multicast != 0
    }

    /// The index libibverbs' `ibv_find_gid_index` returns (untruncated):
    /// the lowest index whose (GID, v1/v2 class) matches, reading empty slots
    /// as (zero GID, class v1), scanning until the first failing query (index
    /// `len`, or index 0 when `port` is not this table's port or is 0).
    #[inline]
    pub fn find_libibverbs(&self, port: u8, gid: &Gid, want_v2: bool) -> Option<u32> {
        if !self.answers(port) {
            return None;
        }
        let found = self.chain(key_of(&gid.0), want_v2).next().map(|(i, _)| i);
        // No entry holds the zero GID (`set` refuses it): it matches the
        // first empty slot, of class v1.
        found.or_else(|| (*gid == Gid::ZERO && !want_v2 && self.first_empty != u32::MAX).then_some(self.first_empty))
    }

    /// Whether libibverbs' GID queries on `port` reach this table (a port
    /// other than the table's, or 0, makes the first query fail).
    #[inline(always)]
    fn answers(&self, port: u8) -> bool {
        port == self.port_num && port != 0
    }

    /// [`find_libibverbs`](Self::find_libibverbs) among the stored entries
    /// only (so never for the zero GID, which only empty slots match), with
    /// the GID as its two 8-byte halves in memory order: the hot path's
    /// search. A `None` here is not final for the zero GID.
    #[inline(always)]
    pub(crate) fn find_libibverbs_stored(&self, port: u8, gid: (u64, u64), want_v2: bool) -> Option<u32> {
        if !self.answers(port) {
            return None;
        }
        let key = [gid.0, gid.1];
        let head = self.head(key, want_v2)?;
        // A chain holds one class: the key decides.
        if head.key == key {
            return Some(u32::from(head.idx));
        }
        // The second slot inline, the rest of the chain out of line.
        let second = self.slots.get(usize::from(head.next))?;
        if second.key == key { Some(u32::from(head.next)) } else { self.walk_cold(second.next, key) }
    }

    /// [`walk`](Self::walk) for the libibverbs search, out of line: most
    /// look-ups end at the head or the slot after it, and the walk inline
    /// would cost the profile's hot path registers (2-3 instructions per
    /// call, `benches/gates.toml`).
    #[cold]
    #[inline(never)]
    fn walk_cold(&self, next: u16, key: [u64; 2]) -> Option<u32> {
        self.walk(next, key, |_| true)
    }

    /// How many GID queries libibverbs would make for a search that ended
    /// with `result` (2 per index examined, plus 1 for the failing query that
    /// ends an unsuccessful scan).
    pub fn libibverbs_query_count(&self, port: u8, result: Option<u32>) -> u64 {
        match result {
            Some(i) => u64::from(i).wrapping_mul(2).wrapping_add(2),
            None if !self.answers(port) => 1,
            None => u64::from(self.len).wrapping_mul(2).wrapping_add(1),
        }
    }

    /// The index the kernel's `rdma_find_gid_by_filter` /
    /// `rdma_find_gid_by_port` returns: the lowest valid entry with this GID,
    /// exactly this type and, when `vlan` is `Some`, this VLAN id (`0xffff` =
    /// untagged, matching entries whose netdev is not on a VLAN).
    #[inline]
    pub fn find_kernel(&self, gid: &Gid, gid_type: GidType, vlan: Option<u16>) -> Option<u32> {
        self.find_kernel_words(gid.to_words(), gid_type, vlan)
    }

    /// [`find_kernel`](Self::find_kernel) with the GID in its word form
    /// ([`Gid::to_words`]): the kernel profile's search.
    #[inline(always)]
    pub(crate) fn find_kernel_words(&self, gid: (u64, u64), gid_type: GidType, vlan: Option<u16>) -> Option<u32> {
        let ty = (gid_type as u8).wrapping_add(1);
        let v2 = ty == TY_ROCE_V2;
        let key = [gid.0, gid.1];
        let head = self.head(key, v2)?;
        if head.key == key && head.ty == ty && vlan.is_none_or(|v| v == head.vlan) {
            return Some(u32::from(head.idx));
        }
        self.walk(head.next, key, |s| s.ty == ty && vlan.is_none_or(|v| v == s.vlan))
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn v4(a: u8) -> Gid {
        Gid::from_ipv4([10, 0, 0, a])
    }

    #[test]
    fn lowest_index_wins_and_classes() {
        let mut t: GidTable<16> = GidTable::new(1, LinkLayer::Ethernet, 16);
        t.set(5, GidEntry::new(v4(1), GidType::RoceV2)).unwrap();
        t.set(2, GidEntry::new(v4(1), GidType::RoceV2)).unwrap();
        t.set(3, GidEntry::new(v4(1), GidType::Ib)).unwrap();
        t.set(7, GidEntry::new(v4(1), GidType::RoceV1)).unwrap();
        assert_eq!(t.find_libibverbs(1, &v4(1), true), Some(2));
        assert_eq!(t.find_libibverbs(1, &v4(1), false), Some(3)); // IB counts as v1
        assert_eq!(t.find_kernel(&v4(1), GidType::RoceV1, None), Some(7));
        assert_eq!(t.find_kernel(&v4(1), GidType::Ib, None), Some(3));
        assert_eq!(t.find_libibverbs(2, &v4(1), true), None);
        assert_eq!(t.find_libibverbs(1, &v4(9), true), None);
        t.clear(2);
        assert_eq!(t.find_libibverbs(1, &v4(1), true), Some(5));
        assert_eq!(t.entries(), 3);
    }

    /// A v1 and a v2 entry of one GID share a bucket (the key carries no
    /// class) but not a chain: each class's search finds its own, both ways.
    #[test]
    fn twins_of_other_classes_do_not_match() {
        for (g, other) in [(v4(7), v4(8)), (Gid::from_ipv4([192, 168, 0, 1]), v4(9))] {
            let mut t: GidTable<16> = GidTable::new(1, LinkLayer::Ethernet, 16);
            t.set(1, GidEntry::new(g, GidType::RoceV2)).unwrap();
            t.set(4, GidEntry::new(g, GidType::RoceV1)).unwrap();
            t.set(6, GidEntry::new(other, GidType::RoceV2)).unwrap();
            assert_eq!(t.find_libibverbs(1, &g, false), Some(4));
            assert_eq!(t.find_libibverbs(1, &g, true), Some(1));
            assert_eq!(t.find_libibverbs_stored(1, g.to_words(), false), Some(4));
            assert_eq!(t.find_libibverbs_stored(1, g.to_words(), true), Some(1));
            assert_eq!(t.find_kernel(&g, GidType::RoceV1, None), Some(4));
            assert_eq!(t.find_kernel(&g, GidType::RoceV2, None), Some(1));
            assert_eq!(t.find_kernel(&g, GidType::Ib, None), None);
            t.clear(1);
            assert_eq!(t.find_libibverbs(1, &g, true), None);
            assert_eq!(t.find_libibverbs_stored(1, g.to_words(), true), None);
            assert_eq!(t.find_libibverbs(1, &g, false), Some(4));
            assert_eq!(t.find_kernel(&g, GidType::RoceV2, None), None);
            t.clear(4);
            assert_eq!(t.find_libibverbs(1, &g, false), None);
            assert_eq!(t.find_libibverbs(1, &other, true), Some(6));
            assert_eq!(t.get(6).map(|e| e.gid), Some(other));
        }
    }

    #[test]
    fn empty_slots_and_zero_gid() {
        let mut t: GidTable<4> = GidTable::new(1, LinkLayer::Ethernet, 4);
        for i in 0..4 {
            t.set(i, GidEntry::new(v4(i as u8 + 1), GidType::RoceV1)).unwrap();
        }
        assert_eq!(t.find_libibverbs(1, &Gid::ZERO, false), None);
        t.clear(2);
        assert_eq!(t.find_libibverbs(1, &Gid::ZERO, false), Some(2));
        assert_eq!(t.find_libibverbs(1, &Gid::ZERO, true), None);
        assert_eq!(t.find_kernel(&Gid::ZERO, GidType::RoceV1, None), None);
        // A table longer than the snapshot: slot N is empty on the device.
        let mut big: GidTable<2> = GidTable::new(1, LinkLayer::Ethernet, 300);
        big.set(0, GidEntry::new(v4(1), GidType::RoceV1)).unwrap();
        big.set(1, GidEntry::new(v4(2), GidType::RoceV1)).unwrap();
        assert_eq!(big.find_libibverbs(1, &Gid::ZERO, false), Some(2));
        assert_eq!(
            big.set(2, GidEntry::new(v4(3), GidType::RoceV1)),
            Err(GidTableError::OverCapacity { index: 2, capacity: 2 })
        );
    }

    #[test]
    fn vlan_filter() {
        let mut t: GidTable<16> = GidTable::new(1, LinkLayer::Ethernet, 16);
        t.set(7, GidEntry::new(v4(1), GidType::RoceV2).with_vlan(100)).unwrap();
        t.set(9, GidEntry::new(v4(1), GidType::RoceV2)).unwrap();
        assert_eq!(t.find_kernel(&v4(1), GidType::RoceV2, Some(100)), Some(7));
        assert_eq!(t.find_kernel(&v4(1), GidType::RoceV2, Some(0xffff)), Some(9));
        assert_eq!(t.find_kernel(&v4(1), GidType::RoceV2, Some(0)), None);
        assert_eq!(t.find_libibverbs(1, &v4(1), true), Some(7));
    }

    #[test]
    fn rejects_bad_updates() {
        let mut t: GidTable<4> = GidTable::new(1, LinkLayer::Ethernet, 3);
        assert_eq!(
            t.set(3, GidEntry::new(v4(1), GidType::RoceV2)),
            Err(GidTableError::IndexOutOfRange { index: 3, len: 3 })
        );
        assert_eq!(t.set(0, GidEntry::new(Gid::ZERO, GidType::RoceV2)), Err(GidTableError::ZeroGid));
        assert_eq!(
            t.set(0, GidEntry::new(v4(1), GidType::RoceV2).with_vlan(4096)),
            Err(GidTableError::InvalidVlan(4096))
        );
    }

    #[test]
    fn many_collisions_keep_order() {
        // Every slot holds the same GID: one chain of 256 in index order.
        let mut t: GidTable<256> = GidTable::new(1, LinkLayer::Ethernet, 256);
        for i in (0..256u32).rev() {
            let ty = if i % 2 == 0 { GidType::RoceV1 } else { GidType::RoceV2 };
            t.set(i, GidEntry::new(v4(1), ty).with_vlan((i % 7) as u16)).unwrap();
        }
        assert_eq!(t.find_libibverbs(1, &v4(1), true), Some(1));
        assert_eq!(t.find_kernel(&v4(1), GidType::RoceV2, Some(3)), Some(3));
        assert_eq!(t.find_kernel(&v4(1), GidType::RoceV1, Some(3)), Some(10));
        let got: std::vec::Vec<u32> = t.iter().map(|(i, _)| i).collect();
        assert_eq!(got.len(), 256);
    }
}
