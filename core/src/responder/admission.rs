//! Admission: the allow-list of source GID prefixes, VLANs and P_Key indices a completion must pass before it may create an AH, and the refusals it counts.

use super::*;

/// How many rules each dimension of an [`Admission`] policy holds.
pub const MAX_RULES: usize = 8;

/// Why [`Admission`] refused a completion: no AH is created for it, and no
/// entry is evicted for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The source GID is in none of the allowed prefixes.
    GidPrefix,
    /// GID prefixes are restricted and the completion has no GRH (no
    /// source GID to check).
    NoGrh,
    /// The completion's VLAN (or its being untagged) is not allowed.
    Vlan,
    /// The completion's P_Key index is not allowed.
    PkeyIndex,
}

impl core::fmt::Display for Refusal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Refusal::GidPrefix => "source GID not in an allowed prefix",
            Refusal::NoGrh => "no GRH: source GID unknown and GID prefixes are restricted",
            Refusal::Vlan => "VLAN not allowed",
            Refusal::PkeyIndex => "P_Key index not allowed",
        })
    }
}

impl core::error::Error for Refusal {}

/// Refused completions, by [`Refusal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct RefusalCounts {
    /// [`Refusal::GidPrefix`].
    pub gid_prefix: u64,
    /// [`Refusal::NoGrh`].
    pub no_grh: u64,
    /// [`Refusal::Vlan`].
    pub vlan: u64,
    /// [`Refusal::PkeyIndex`].
    pub pkey_index: u64,
}

impl RefusalCounts {
    pub(super) fn count(&mut self, r: Refusal) {
        let c = match r {
            Refusal::GidPrefix => &mut self.gid_prefix,
            Refusal::NoGrh => &mut self.no_grh,
            Refusal::Vlan => &mut self.vlan,
            Refusal::PkeyIndex => &mut self.pkey_index,
        };
        *c = c.saturating_add(1);
    }

    /// All refusals.
    pub fn total(&self) -> u64 {
        self.gid_prefix.saturating_add(self.no_grh).saturating_add(self.vlan).saturating_add(self.pkey_index)
    }
}

/// Why an [`Admission`] rule could not be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AdmissionError {
    /// That dimension already holds [`MAX_RULES`] rules.
    TooManyRules,
    /// A GID prefix longer than 128 bits (or an IPv4 one longer than 32).
    PrefixTooLong(u8),
}

impl core::fmt::Display for AdmissionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AdmissionError::TooManyRules => write!(f, "at most {MAX_RULES} rules per dimension"),
            AdmissionError::PrefixTooLong(n) => write!(f, "prefix length {n} is too long"),
        }
    }
}

impl core::error::Error for AdmissionError {}

/// One dimension of an admission policy: unrestricted, or a short list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Rules<T> {
    any: bool,
    len: u8,
    items: [T; MAX_RULES],
}

impl<T: Copy + PartialEq> Rules<T> {
    const fn new(any: bool, zero: T) -> Rules<T> {
        Rules { any, len: 0, items: [zero; MAX_RULES] }
    }

    fn push(mut self, item: T) -> Result<Rules<T>, AdmissionError> {
        let slot = self.items.get_mut(usize::from(self.len)).ok_or(AdmissionError::TooManyRules)?;
        *slot = item;
        self.len = self.len.wrapping_add(1);
        self.any = false;
        Ok(self)
    }

    fn allows(&self, f: impl Fn(&T) -> bool) -> bool {
        self.any || self.items.iter().take(usize::from(self.len)).any(f)
    }
}

/// Who may make the responder create an AH: an allow-list of source GID
/// prefixes (IPv4 subnets are IPv4-mapped prefixes), VLANs and P_Key
/// indices, checked after the profile and before the cache, so that
/// strangers never create AHs nor evict known peers.
///
/// A completion is admitted when each of the three dimensions allows it. A
/// dimension is either unrestricted or a list of up to [`MAX_RULES`] rules;
/// adding a rule to an unrestricted dimension restricts it to that rule.
/// [`allow_all`](Self::allow_all) (the default) leaves all three
/// unrestricted; [`deny_all`](Self::deny_all), a gateway's choice, restricts
/// all three to nothing, so that only what is allowed in every dimension
/// gets through ([`any_vlan`](Self::any_vlan) and friends lift one again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Admission {
    /// All three dimensions unrestricted: nothing to check.
    open: bool,
    /// (prefix value, mask), big-endian `u128`s.
    prefixes: Rules<(u128, u128)>,
    /// `None`: untagged.
    vlans: Rules<Option<u16>>,
    pkeys: Rules<u16>,
}

impl Default for Admission {
    fn default() -> Admission {
        Admission::allow_all()
    }
}

impl Admission {
    /// Everything admitted.
    pub const fn allow_all() -> Admission {
        Admission {
            open: true,
            prefixes: Rules::new(true, (0, 0)),
            vlans: Rules::new(true, None),
            pkeys: Rules::new(true, 0),
        }
    }

    /// Nothing admitted until rules are added in every dimension.
    pub const fn deny_all() -> Admission {
        Admission {
            open: false,
            prefixes: Rules::new(false, (0, 0)),
            vlans: Rules::new(false, None),
            pkeys: Rules::new(false, 0),
        }
    }

    fn reopen(mut self) -> Admission {
        self.open = self.prefixes.any & self.vlans.any & self.pkeys.any;
        self
    }

    /// Also admits source GIDs whose first `len` bits are `prefix`'s.
    pub fn allow_gid_prefix(mut self, prefix: Gid, len: u8) -> Result<Admission, AdmissionError> {
        if len > 128 {
            return Err(AdmissionError::PrefixTooLong(len));
        }
        let mask = u128::MAX.checked_shl(128u32.wrapping_sub(u32::from(len))).unwrap_or(0);
        self.prefixes = self.prefixes.push((prefix.to_u128() & mask, mask))?;
        Ok(self.reopen())
    }

    /// Also admits RoCE v2 / IPv4 sources in `addr/len` (the IPv4-mapped
    /// GID prefix `::ffff:addr/(96 + len)`).
    pub fn allow_ipv4_subnet(self, addr: [u8; 4], len: u8) -> Result<Admission, AdmissionError> {
        if len > 32 {
            return Err(AdmissionError::PrefixTooLong(len));
        }
        self.allow_gid_prefix(Gid::from_ipv4(addr), len.wrapping_add(96))
    }

    /// Also admits completions on VLAN `vlan` (`None`: untagged, which
    /// includes every InfiniBand completion and every completion in the
    /// userspace encoding, which does not report a VLAN).
    pub fn allow_vlan(mut self, vlan: Option<u16>) -> Result<Admission, AdmissionError> {
        self.vlans = self.vlans.push(vlan)?;
        Ok(self.reopen())
    }

    /// Also admits completions with P_Key index `index`.
    pub fn allow_pkey_index(mut self, index: u16) -> Result<Admission, AdmissionError> {
        self.pkeys = self.pkeys.push(index)?;
        Ok(self.reopen())
    }

    /// Any source GID (drops the prefix rules).
    pub fn any_gid(mut self) -> Admission {
        self.prefixes = Rules::new(true, (0, 0));
        self.reopen()
    }

    /// Any VLAN (drops the VLAN rules).
    pub fn any_vlan(mut self) -> Admission {
        self.vlans = Rules::new(true, None);
        self.reopen()
    }

    /// Any P_Key index (drops the P_Key rules).
    pub fn any_pkey_index(mut self) -> Admission {
        self.pkeys = Rules::new(true, 0);
        self.reopen()
    }

    /// Whether everything is admitted.
    #[inline(always)]
    pub const fn is_open(&self) -> bool {
        self.open
    }

    /// The verdict on a completion `wc` whose reply attribute is `words`
    /// (its `dgid` is the packet's source GID).
    pub fn check<C: Completion + ?Sized>(&self, words: &AttrWords, wc: &C) -> Result<(), Refusal> {
        if self.open {
            return Ok(());
        }
        let k = wc.kernel();
        if !self.pkeys.allows(|&p| p == k.pkey_index) {
            return Err(Refusal::PkeyIndex);
        }
        let vlan = k.vlan();
        if !self.vlans.allows(|&v| v == vlan) {
            return Err(Refusal::Vlan);
        }
        if !self.prefixes.any {
            let Some(src) = words.dgid() else { return Err(Refusal::NoGrh) };
            let src = src.to_u128();
            if !self.prefixes.allows(|&(value, mask)| src & mask == value) {
                return Err(Refusal::GidPrefix);
            }
        }
        Ok(())
    }
}
