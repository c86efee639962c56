//! Address handles, and the conversion of udah's attributes to `ibv_ah_attr`.

use super::*;

/// Converts validated attributes to the C struct, by value (the GID is
/// copied into the union's `raw` member, never cast; STYLE pitfall 1).
pub(crate) fn ah_attr_to_c(a: &AhAttr) -> ibv_ah_attr {
    let c = udah_core::ah::IbvAhAttr::from(a);
    ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid { raw: c.grh.dgid },
            flow_label: c.grh.flow_label,
            sgid_index: c.grh.sgid_index,
            hop_limit: c.grh.hop_limit,
            traffic_class: c.grh.traffic_class,
        },
        dlid: c.dlid,
        sl: c.sl,
        src_path_bits: c.src_path_bits,
        static_rate: c.static_rate,
        is_global: c.is_global,
        port_num: c.port_num,
    }
}

/// An address handle (`ibv_ah`).
///
/// Destroy it with [`destroy`](AddressHandle::destroy) to see the result;
/// dropping it destroys it too, counting a failure in
/// [`teardown_failures`] instead of panicking.
#[derive(Debug)]
pub struct AddressHandle {
    pub(super) raw: NonNull<ibv_ah>,
    pub(super) attr: AhAttr,
    pub(super) pd: Pd,
}

// SAFETY: an AH may be used and destroyed from any thread.
unsafe impl Send for AddressHandle {}
// SAFETY: `&AddressHandle` only reads the pointer to pass it to verbs.
unsafe impl Sync for AddressHandle {}

impl AddressHandle {
    /// `ibv_create_ah` on `pd`.
    pub fn create(pd: &Pd, attr: &AhAttr) -> Result<AddressHandle, VerbsError> {
        let mut c = ah_attr_to_c(attr);
        // SAFETY: the PD is alive and `c` is a valid `ibv_ah_attr` (layout
        // pinned); the AH is owned by the value returned and destroyed once.
        let raw = unsafe { sys::ibv_create_ah(pd.0.raw.as_ptr(), &mut c) };
        let raw = NonNull::new(raw).ok_or_else(|| {
            let mut e =
                VerbsError::verb(Op::CreateAh, last_errno()).on_device(pd.context().name()).on_port(attr.port.get());
            if let Some(g) = attr.grh {
                e = e.at_gid_index(u32::from(g.sgid_index));
            }
            e
        })?;
        Ok(AddressHandle { raw, attr: *attr, pd: pd.clone() })
    }

    /// The attributes it was created from.
    pub fn attr(&self) -> &AhAttr {
        &self.attr
    }

    /// A token identifying this AH while it lives (its address).
    pub fn token(&self) -> u64 {
        self.raw.as_ptr() as usize as u64
    }

    /// Gives up ownership: the `ibv_ah` is no longer destroyed by this value
    /// (nor its PD reference kept). The caller destroys it with
    /// [`destroy_raw`](Self::destroy_raw) while the PD is alive.
    pub(crate) fn into_raw(self) -> NonNull<ibv_ah> {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this.pd` is read out once and never used again through
        // `this`, which is not dropped; this releases the PD reference.
        drop(unsafe { core::ptr::read(&this.pd) });
        this.raw
    }

    /// `ibv_destroy_ah` of a pointer from [`into_raw`](Self::into_raw).
    ///
    /// # Safety
    ///
    /// `raw` came from `into_raw` of an AH created on `pd`, has not been
    /// destroyed yet, and no other thread uses it during or after the call.
    pub(crate) unsafe fn destroy_raw(raw: NonNull<ibv_ah>, pd: &Pd) -> Result<(), VerbsError> {
        // SAFETY: the caller guarantees a live AH that nobody else uses; it
        // is destroyed exactly once, here. Its PD (`pd`) is alive.
        let ret = unsafe { sys::ibv_destroy_ah(raw.as_ptr()) };
        check(Op::DestroyAh, ret).map_err(|e| e.on_device(pd.context().name()))
    }

    /// `ibv_destroy_ah`, reporting failure. The AH is gone either way.
    pub fn destroy(self) -> Result<(), VerbsError> {
        let this = ManuallyDrop::new(self);
        // SAFETY: the AH came from `ibv_create_ah`; `ManuallyDrop` keeps
        // `Drop` from destroying it a second time.
        let ret = unsafe { sys::ibv_destroy_ah(this.raw.as_ptr()) };
        let port = this.attr.port.get();
        let device = this.pd.context().name().to_owned();
        // SAFETY: `this.pd` is read out once and never used again through
        // `this`, which is not dropped; this releases the PD reference.
        drop(unsafe { core::ptr::read(&this.pd) });
        check(Op::DestroyAh, ret).map_err(|e| e.on_device(&device).on_port(port))
    }
}

impl Drop for AddressHandle {
    fn drop(&mut self) {
        // SAFETY: the AH came from `ibv_create_ah` and is destroyed once (the
        // explicit `destroy` path skips this `Drop`).
        count_teardown(unsafe { sys::ibv_destroy_ah(self.raw.as_ptr()) });
    }
}
