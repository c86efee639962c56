//! The key forms a look-up takes: an attribute prepared once, hashed canonical words, and the sealed `Lookup` trait that derives a key from each.

use super::*;

/// An [`AhAttr`] prepared for repeated look-ups: the attribute with its
/// packed key and the key's hash, computed once. A runtime that keeps
/// per-peer state (an MPI or UCX-style endpoint) prepares each peer's
/// attribute when it learns it, and its hits then start at the probe:
/// [`AhTable::get_or_create`], [`AhTable::get`]. The table's hash is keyed
/// ([`AhTable::with_seed`]): [`AhTable::prepare`] keeps that table's hash,
/// [`PreparedAttr::new`] the hash of the seed-0 tables ([`AhTable::new`]).
/// Any `PreparedAttr` works with any table; a table whose hash it does not
/// keep computes it per look-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreparedAttr {
    attr: AhAttr,
    pub(super) key: Key,
    pub(super) hash: u64,
    /// The first word of the hash key `hash` was computed with.
    pub(super) keyed: u64,
}

impl PreparedAttr {
    /// Prepares `attr` for the tables of seed 0 ([`AhTable::new`]).
    #[inline]
    pub fn new(attr: &AhAttr) -> PreparedAttr {
        PreparedAttr::keyed(attr, &HashKey::new(0))
    }

    #[inline]
    pub(super) fn keyed(attr: &AhAttr, k: &HashKey) -> PreparedAttr {
        let key = Key::new(attr);
        PreparedAttr { attr: *attr, key, hash: key.hash(k), keyed: k.0[0] }
    }

    /// The attribute.
    #[inline]
    pub fn attr(&self) -> &AhAttr {
        &self.attr
    }
}

impl From<&AhAttr> for PreparedAttr {
    #[inline]
    fn from(attr: &AhAttr) -> PreparedAttr {
        PreparedAttr::new(attr)
    }
}

/// [`CanonicalWords`] with their hash in one table, made by
/// [`AhCache::prefetch`] (which also starts loading the first slot their
/// look-up reads): a batch stages a few of these, then looks them up
/// without hashing again. Used with another table, the hash is computed
/// again (the tag is the hash key's first word, as for [`PreparedAttr`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hashed {
    pub(super) words: CanonicalWords,
    pub(super) hash: u64,
    /// The first word of the hash key `hash` was computed with (0 for
    /// [`unhashed`](Self::unhashed): a table whose hash key starts with 0,
    /// one seed in 2⁶⁴, would take hash 0 for the words' own, and its
    /// look-up would miss and find the entry on the slow path, which
    /// hashes again).
    pub(super) keyed: u64,
}

impl Hashed {
    /// `words` without a hash (a cache that does not prefetch).
    #[inline(always)]
    pub const fn unhashed(words: CanonicalWords) -> Hashed {
        Hashed { words, hash: 0, keyed: 0 }
    }

    /// The words.
    #[inline(always)]
    pub const fn words(&self) -> CanonicalWords {
        self.words
    }
}

/// What a look-up is keyed by: an [`AhAttr`], a [`PreparedAttr`] (key and
/// hash computed once), an attribute's [`AttrWords`] (a profile's output:
/// canonical words are the key itself), or [`CanonicalWords`] (words proven
/// canonical: the key with no check). Sealed: the table's key derivation is
/// internal.
pub trait Lookup: sealed::Sealed {}

mod sealed {
    use super::{
        AhAttr, AhHandle, AhTable, AttrError, AttrWords, CanonicalWords, Hashed, Key, PreparedAttr, Probe, Session,
        TableError,
    };
    use crate::hal::{AhToken, Hal};

    /// The key forms' look-ups: each form goes its own way to the probe (an
    /// attribute packs its key, a prepared one has it, words are it when
    /// canonical), and all meet in the table's slow path.
    pub trait Sealed {
        /// [`AhTable::get`].
        fn table_get<H: Hal, const N: usize>(&self, t: &AhTable<H, N>) -> Option<AhHandle<H::Ah>>
        where
            H::Ah: AhToken;
        /// [`AhTable::get_or_create`] (`block`) or [`AhTable::try_get_or_create`],
        /// the error converted to the caller's `X` where it arises, so that
        /// a hit's result is built once, in the caller's type.
        fn table_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize>(
            &self,
            t: &AhTable<H, N>,
            hal: &H,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken;
        /// [`Session::get_or_create`] (`block`) or [`Session::try_get_or_create`].
        fn session_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize, const L: usize>(
            &self,
            s: &mut Session<'_, H, N, L>,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken;
        /// The attribute, for the slow path.
        fn to_attr(&self) -> Result<AhAttr, AttrError>;
    }

    impl Sealed for AhAttr {
        #[inline(always)]
        fn table_get<H: Hal, const N: usize>(&self, t: &AhTable<H, N>) -> Option<AhHandle<H::Ah>>
        where
            H::Ah: AhToken,
        {
            t.get_key::<true>(&Key::new(self), None)
        }
        #[inline(always)]
        fn table_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize>(
            &self,
            t: &AhTable<H, N>,
            hal: &H,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            t.lookup(hal, &Key::new(self), self, block)
        }
        #[inline(always)]
        fn session_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize, const L: usize>(
            &self,
            s: &mut Session<'_, H, N, L>,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            let k = Key::new(self);
            let h = s.table().hash(&k);
            s.lookup(&k, h, self, block)
        }
        #[inline(always)]
        fn to_attr(&self) -> Result<AhAttr, AttrError> {
            Ok(*self)
        }
    }

    impl Sealed for PreparedAttr {
        #[inline(always)]
        fn table_get<H: Hal, const N: usize>(&self, t: &AhTable<H, N>) -> Option<AhHandle<H::Ah>>
        where
            H::Ah: AhToken,
        {
            t.get_key::<true>(&self.key, Some(t.prepared_hash(self)))
        }
        #[inline(always)]
        fn table_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize>(
            &self,
            t: &AhTable<H, N>,
            hal: &H,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            match t.probe_from::<true>(&self.key, t.prepared_hash(self), 0) {
                Probe::Hit(s, g, tok) => Ok(AhTable::<H, N>::handle(s, g, tok)),
                Probe::Overflow => Err(TableError::RefcountOverflow.into()),
                probe => t.lookup_slow(hal, &self.attr, block, probe).map_err(X::from),
            }
        }
        #[inline(always)]
        fn session_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize, const L: usize>(
            &self,
            s: &mut Session<'_, H, N, L>,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            let h = s.table().prepared_hash(self);
            s.lookup(&self.key, h, &self.attr, block)
        }
        #[inline(always)]
        fn to_attr(&self) -> Result<AhAttr, AttrError> {
            Ok(self.attr)
        }
    }

    impl Sealed for AttrWords {
        #[inline(always)]
        fn table_get<H: Hal, const N: usize>(&self, t: &AhTable<H, N>) -> Option<AhHandle<H::Ah>>
        where
            H::Ah: AhToken,
        {
            match Key::from_words(*self) {
                Some(k) => t.get_key::<false>(&k, None),
                None => t.get_key::<false>(&Key::new(&self.to_attr().ok()?), None),
            }
        }
        #[inline(always)]
        fn table_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize>(
            &self,
            t: &AhTable<H, N>,
            hal: &H,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            // The key straight from the words: no attribute is built unless
            // the probe misses.
            let Some(k) = Key::from_words(*self) else {
                return t.lookup_converted(hal, self, block, None).map_err(X::from);
            };
            match t.probe::<false>(&k) {
                Probe::Hit(s, g, tok) => Ok(AhTable::<H, N>::handle(s, g, tok)),
                Probe::Overflow => Err(TableError::RefcountOverflow.into()),
                p => t.lookup_converted(hal, self, block, Some(p)).map_err(X::from),
            }
        }
        #[inline(always)]
        fn session_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize, const L: usize>(
            &self,
            s: &mut Session<'_, H, N, L>,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            s.lookup_words(Key::from_words(*self), *self, block)
        }
        #[inline]
        fn to_attr(&self) -> Result<AhAttr, AttrError> {
            AttrWords::to_attr(*self)
        }
    }
    impl Sealed for CanonicalWords {
        #[inline(always)]
        fn table_get<H: Hal, const N: usize>(&self, t: &AhTable<H, N>) -> Option<AhHandle<H::Ah>>
        where
            H::Ah: AhToken,
        {
            t.get_key::<false>(&Key(self.words().raw()), None)
        }
        #[inline(always)]
        fn table_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize>(
            &self,
            t: &AhTable<H, N>,
            hal: &H,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            match t.probe::<false>(&Key(self.words().raw())) {
                Probe::Hit(s, g, tok) => Ok(AhTable::<H, N>::handle(s, g, tok)),
                Probe::Overflow => Err(TableError::RefcountOverflow.into()),
                p => t.lookup_converted(hal, &self.words(), block, Some(p)).map_err(X::from),
            }
        }
        #[inline(always)]
        fn session_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize, const L: usize>(
            &self,
            s: &mut Session<'_, H, N, L>,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            s.lookup_words(Some(Key(self.words().raw())), self.words(), block)
        }
        #[inline]
        fn to_attr(&self) -> Result<AhAttr, AttrError> {
            self.words().to_attr()
        }
    }

    impl Sealed for Hashed {
        #[inline(always)]
        fn table_get<H: Hal, const N: usize>(&self, t: &AhTable<H, N>) -> Option<AhHandle<H::Ah>>
        where
            H::Ah: AhToken,
        {
            let k = Key(self.words.words().raw());
            t.get_key::<false>(&k, Some(t.hashed_hash(self, &k)))
        }
        #[inline(always)]
        fn table_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize>(
            &self,
            t: &AhTable<H, N>,
            hal: &H,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            let k = Key(self.words.words().raw());
            match t.probe_from::<false>(&k, t.hashed_hash(self, &k), 0) {
                Probe::Hit(s, g, tok) => Ok(AhTable::<H, N>::handle(s, g, tok)),
                Probe::Overflow => Err(TableError::RefcountOverflow.into()),
                p => t.lookup_converted(hal, &self.words.words(), block, Some(p)).map_err(X::from),
            }
        }
        #[inline(always)]
        fn session_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize, const L: usize>(
            &self,
            s: &mut Session<'_, H, N, L>,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            let k = Key(self.words.words().raw());
            let h = s.table().hashed_hash(self, &k);
            s.lookup_words_hashed(k, h, self.words.words(), block)
        }
        #[inline]
        fn to_attr(&self) -> Result<AhAttr, AttrError> {
            self.words.words().to_attr()
        }
    }
}

impl Lookup for AhAttr {}
impl Lookup for PreparedAttr {}
impl Lookup for AttrWords {}
impl Lookup for CanonicalWords {}
impl Lookup for Hashed {}
