//! [`AhCache`]: what a responder needs from an AH cache, implemented by the
//! shared table ([`Shared`], the table with its backend) and by a
//! [`Session`].

use core::borrow::Borrow;
use core::ops::Deref;

use super::{AhHandle, AhTable, Hashed, Lookup, Session, TableError, TableStats};
use crate::attr::{AttrWords, CanonicalWords};
use crate::gid_table::GidTable;
use crate::hal::{AhToken, Hal};
use crate::wire::Gid;

/// Whether a look-up that finds another thread creating the same AH waits
/// for it ([`get_or_create`](AhTable::get_or_create)) or returns
/// [`TableError::Pending`] ([`try_get_or_create`](AhTable::try_get_or_create)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Wait {
    /// Wait for the other thread's create.
    #[default]
    Block,
    /// Return [`TableError::Pending`].
    Try,
}

/// The backend AH of a cache.
pub type CacheAh<C> = <<C as AhCache>::Backend as Hal>::Ah;
/// The error of a cache's look-ups.
pub type CacheError<C> = TableError<<<C as AhCache>::Backend as crate::hal::ErrorType>::Error>;
/// One result of a cache's look-up.
pub type CacheResult<C> = Result<AhHandle<CacheAh<C>>, CacheError<C>>;

/// An AH cache keyed by the [word form](AttrWords) of attributes, with its
/// backend: the last stage of the pipeline (profile → words → admission →
/// cache). Implemented by [`Shared`] (the table's own calls: one
/// compare-and-swap per hit and per release) and by [`Session`] (one
/// thread's leases: repeated hits without a locked instruction).
///
/// The backend belongs to the cache, so a caller cannot pass one that
/// disagrees with it.
pub trait AhCache {
    /// The backend that creates and destroys the AHs.
    type Backend: Hal;

    /// The backend.
    fn backend(&self) -> &Self::Backend;

    /// A reference to the AH for `key` (the [word form](AttrWords) a
    /// profile made, or any other [`Lookup`] form), created on a miss
    /// ([`AhTable::get_or_create`] / [`try_get_or_create`](AhTable::try_get_or_create)).
    /// The error comes as the caller's `X` (any type a [`TableError`]
    /// converts into: the table's own, a responder's), converted where it
    /// arises, so that a hit's result is built once, in the caller's type.
    fn lookup<K: Lookup, X: From<CacheError<Self>>>(
        &mut self,
        key: K,
        wait: Wait,
    ) -> Result<AhHandle<CacheAh<Self>>, X>;

    /// [`lookup`](Self::lookup) of each of `words` in order, the results
    /// written to `out`, until either ends. Returns how many were looked up.
    #[inline]
    fn lookup_batch(&mut self, words: &[AttrWords], wait: Wait, out: &mut [Option<CacheResult<Self>>]) -> usize {
        fill(words.iter(), out, |w| self.lookup(*w, wait))
    }

    /// Whether a batch should stage its look-ups and
    /// [`prefetch`](Self::prefetch) them first
    /// ([`Responder::resolve_batch`](crate::responder::Responder::resolve_batch)):
    /// [`AhTable::PREFETCH`], a table too large to stay in a core's caches.
    const PREFETCH: bool = false;

    /// `words` as a [`Hashed`] look-up form for this cache (the hash
    /// computed once), with the first slot its look-up reads starting to
    /// load into the cache ([`AhTable::prefetch`]). A cache without a table
    /// of its own gives the words unhashed.
    #[inline(always)]
    fn prefetch(&self, words: CanonicalWords) -> Hashed {
        Hashed::unhashed(words)
    }

    /// Gives a reference back.
    fn release(&mut self, handle: AhHandle<CacheAh<Self>>) -> Result<(), CacheError<Self>>;

    /// [`AhTable::retire_gid_change`] after the port's GID table went from
    /// `old` to `new`. Returns how many entries were retired.
    fn retire_gid_change<const M: usize>(&mut self, old: &GidTable<M>, new: &GidTable<M>) -> usize;

    /// [`AhTable::retire_l2_change`] after `dgid` on `port` started to
    /// resolve to `dmac`. Returns how many entries were retired.
    fn retire_l2_change(&mut self, port: u8, dgid: &Gid, dmac: [u8; 6]) -> usize;

    /// The table's counters.
    fn stats(&self) -> TableStats;
}

/// Writes `f(x)` for each `x` of `items` to the next element of `out` until
/// either ends; returns how many were written. An element is taken from
/// `items` only when `out` has room, so an iterator passed by reference
/// (`iter.by_ref()`) keeps what was not consumed. The one batch loop of the
/// cache and the responder.
#[inline(always)]
pub(crate) fn fill<I: Iterator, X>(mut items: I, out: &mut [Option<X>], mut f: impl FnMut(I::Item) -> X) -> usize {
    let mut n = 0usize;
    for o in out.iter_mut() {
        let Some(x) = items.next() else { break };
        *o = Some(f(x));
        n = n.wrapping_add(1);
    }
    n
}

/// An [`AhTable`] with its backend, as an [`AhCache`]: the table's own
/// look-ups and releases. `B` is the backend or a reference to it, `T` the
/// table or a reference to it (`&AhTable`, a `Box`, an `Arc`, …), so that a
/// shared `static` table and an owned one both work.
#[derive(Debug, Clone, Copy)]
pub struct Shared<B, T> {
    hal: B,
    table: T,
}

impl<B, T> Shared<B, T> {
    /// The cache of `table`, creating with `hal`.
    pub const fn new(hal: B, table: T) -> Shared<B, T> {
        Shared { hal, table }
    }

    /// The table.
    pub fn table(&self) -> &T {
        &self.table
    }
}

impl<H: Hal, const N: usize> AhTable<H, N>
where
    H::Ah: AhToken,
{
    /// This table with `hal` as an [`AhCache`] ([`Shared`]).
    #[inline]
    pub fn shared<'t>(&'t self, hal: &'t H) -> Shared<&'t H, &'t AhTable<H, N>> {
        Shared::new(hal, self)
    }
}

impl<H, B, T, const N: usize> AhCache for Shared<B, T>
where
    H: Hal,
    H::Ah: AhToken,
    B: Borrow<H>,
    T: Deref<Target = AhTable<H, N>>,
{
    type Backend = H;

    #[inline(always)]
    fn backend(&self) -> &H {
        self.hal.borrow()
    }

    #[inline(always)]
    fn lookup<K: Lookup, X: From<TableError<H::Error>>>(&mut self, key: K, wait: Wait) -> Result<AhHandle<H::Ah>, X> {
        key.table_lookup(&*self.table, self.hal.borrow(), wait == Wait::Block)
    }

    const PREFETCH: bool = AhTable::<H, N>::PREFETCH;

    #[inline(always)]
    fn prefetch(&self, words: CanonicalWords) -> Hashed {
        self.table.prefetch(words)
    }

    #[inline]
    fn release(&mut self, handle: AhHandle<H::Ah>) -> Result<(), TableError<H::Error>> {
        self.table.release(self.hal.borrow(), handle)
    }

    fn retire_gid_change<const M: usize>(&mut self, old: &GidTable<M>, new: &GidTable<M>) -> usize {
        self.table.retire_gid_change(self.hal.borrow(), old, new)
    }

    fn retire_l2_change(&mut self, port: u8, dgid: &Gid, dmac: [u8; 6]) -> usize {
        self.table.retire_l2_change(self.hal.borrow(), port, dgid, dmac)
    }

    fn stats(&self) -> TableStats {
        self.table.stats()
    }
}

impl<H: Hal, const N: usize, const L: usize> AhCache for Session<'_, H, N, L>
where
    H::Ah: AhToken,
{
    type Backend = H;

    #[inline(always)]
    fn backend(&self) -> &H {
        self.backend()
    }

    #[inline(always)]
    fn lookup<K: Lookup, X: From<TableError<H::Error>>>(&mut self, key: K, wait: Wait) -> Result<AhHandle<H::Ah>, X> {
        self.lookup_any(&key, wait == Wait::Block)
    }

    const PREFETCH: bool = AhTable::<H, N>::PREFETCH;

    #[inline(always)]
    fn prefetch(&self, words: CanonicalWords) -> Hashed {
        self.table().prefetch(words)
    }

    #[inline(always)]
    fn release(&mut self, handle: AhHandle<H::Ah>) -> Result<(), TableError<H::Error>> {
        Session::release(self, handle)
    }

    fn retire_gid_change<const M: usize>(&mut self, old: &GidTable<M>, new: &GidTable<M>) -> usize {
        // The session gives back its leases of retired entries at its next
        // look-up (the table bumps its reclaim epoch).
        self.table().retire_gid_change(self.backend(), old, new)
    }

    fn retire_l2_change(&mut self, port: u8, dgid: &Gid, dmac: [u8; 6]) -> usize {
        self.table().retire_l2_change(self.backend(), port, dgid, dmac)
    }

    fn stats(&self) -> TableStats {
        self.table().stats()
    }
}

impl<C: AhCache + ?Sized> AhCache for &mut C {
    type Backend = C::Backend;

    #[inline(always)]
    fn backend(&self) -> &C::Backend {
        C::backend(self)
    }

    #[inline(always)]
    fn lookup<K: Lookup, X: From<CacheError<C>>>(&mut self, key: K, wait: Wait) -> Result<AhHandle<CacheAh<C>>, X> {
        C::lookup(self, key, wait)
    }

    const PREFETCH: bool = C::PREFETCH;

    #[inline(always)]
    fn prefetch(&self, words: CanonicalWords) -> Hashed {
        C::prefetch(self, words)
    }

    #[inline(always)]
    fn release(&mut self, handle: AhHandle<CacheAh<C>>) -> Result<(), CacheError<C>> {
        C::release(self, handle)
    }

    fn retire_gid_change<const M: usize>(&mut self, old: &GidTable<M>, new: &GidTable<M>) -> usize {
        C::retire_gid_change(self, old, new)
    }

    fn retire_l2_change(&mut self, port: u8, dgid: &Gid, dmac: [u8; 6]) -> usize {
        C::retire_l2_change(self, port, dgid, dmac)
    }

    fn stats(&self) -> TableStats {
        C::stats(self)
    }
}

/// `C` with a batch's staging and prefetch ([`AhCache::PREFETCH`]) forced on
/// (`ON = true`) or off, whatever the size of its table: off for a large
/// table whose working set stays in the caches anyway, on to try it for a
/// smaller one. Everything else is `C`'s.
#[derive(Debug, Clone, Copy)]
pub struct Prefetch<C, const ON: bool>(pub C);

impl<C: AhCache, const ON: bool> AhCache for Prefetch<C, ON> {
    type Backend = C::Backend;

    #[inline(always)]
    fn backend(&self) -> &C::Backend {
        self.0.backend()
    }

    #[inline(always)]
    fn lookup<K: Lookup, X: From<CacheError<C>>>(&mut self, key: K, wait: Wait) -> Result<AhHandle<CacheAh<C>>, X> {
        self.0.lookup(key, wait)
    }

    const PREFETCH: bool = ON;

    #[inline(always)]
    fn prefetch(&self, words: CanonicalWords) -> Hashed {
        self.0.prefetch(words)
    }

    #[inline(always)]
    fn release(&mut self, handle: AhHandle<CacheAh<C>>) -> Result<(), CacheError<C>> {
        self.0.release(handle)
    }

    fn retire_gid_change<const M: usize>(&mut self, old: &GidTable<M>, new: &GidTable<M>) -> usize {
        self.0.retire_gid_change(old, new)
    }

    fn retire_l2_change(&mut self, port: u8, dgid: &Gid, dmac: [u8; 6]) -> usize {
        self.0.retire_l2_change(port, dgid, dmac)
    }

    fn stats(&self) -> TableStats {
        self.0.stats()
    }
}
