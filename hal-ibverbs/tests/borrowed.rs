//! Borrowed (application-owned) contexts and PDs, on the host: fake C
//! objects stand in for the application's, so any attempt by udah to close
//! or free them (`ibv_close_device` / `ibv_dealloc_pd` on a fake) would
//! crash or count a teardown failure. The same on a real device is
//! `hardware.rs`'s `borrowed_context_and_pd`.

#![allow(unsafe_code)]

use core::ptr::NonNull;

use rdma_mummy_sys::{ibv_context, ibv_pd};
use udah_hal_ibverbs::{Context, IbverbsHal, Pd, VerbsError, teardown_failures};

fn fake_context() -> Box<ibv_context> {
    // SAFETY: `ibv_context` is integers, pointers and a pthread mutex, all
    // valid when zeroed; udah reads only `device` (NULL: no name lookup).
    Box::new(unsafe { core::mem::zeroed() })
}

fn fake_pd(ctx: *mut ibv_context) -> Box<ibv_pd> {
    // SAFETY: `ibv_pd` is two pointers and an integer; all-zero is valid.
    let mut pd: Box<ibv_pd> = Box::new(unsafe { core::mem::zeroed() });
    pd.context = ctx;
    pd
}

#[test]
fn a_borrowed_context_and_pd_are_never_closed_or_freed() {
    let mut ctx_mem = fake_context();
    let raw_ctx = NonNull::from(&mut *ctx_mem);
    let before = teardown_failures();
    // SAFETY: a zeroed fake that outlives every clone made below.
    let ctx = unsafe { Context::from_raw_borrowed(raw_ctx) };
    assert!(!ctx.is_owned());
    assert_eq!(ctx.as_raw(), raw_ctx.as_ptr());
    assert_eq!(ctx.name(), "", "no device pointer: no name");
    let mut pd_mem = fake_pd(raw_ctx.as_ptr());
    // SAFETY: a fake PD that outlives the `Pd`.
    let pd = unsafe { Pd::from_raw_borrowed(&ctx, NonNull::from(&mut *pd_mem)) }.unwrap();
    assert!(!pd.is_owned());
    assert_eq!(pd.as_raw(), &raw mut *pd_mem);
    let pd2 = pd.clone();
    drop((pd, pd2, ctx.clone()));
    drop(ctx);
    // Had udah called ibv_dealloc_pd / ibv_close_device on the fakes, the
    // provider ops (NULL) would have crashed, or the call failed and counted.
    assert_eq!(teardown_failures(), before);
    // The application's objects are untouched.
    assert_eq!(pd_mem.context, raw_ctx.as_ptr());
}

#[test]
fn a_pd_of_another_context_is_refused() {
    let (mut a, mut b) = (fake_context(), fake_context());
    let (ra, rb) = (NonNull::from(&mut *a), NonNull::from(&mut *b));
    // SAFETY: zeroed fakes outliving the values made here.
    let ctx = unsafe { Context::from_raw_borrowed(ra) };
    let mut pd_mem = fake_pd(rb.as_ptr());
    // SAFETY: as above.
    let err = unsafe { Pd::from_raw_borrowed(&ctx, NonNull::from(&mut *pd_mem)) }.unwrap_err();
    assert!(matches!(err, VerbsError::PdContextMismatch { .. }), "{err:?}");
    assert!(err.to_string().contains("not allocated on this context"), "{err}");
}

#[test]
fn null_pointers_are_refused() {
    let mut c = fake_context();
    // SAFETY: NULL is allowed (refused with an error); the fake is never
    // used because the PD is NULL and checked before anything is called.
    let e = unsafe { IbverbsHal::from_raw_borrowed(core::ptr::null_mut(), core::ptr::null_mut(), 1) }.unwrap_err();
    assert_eq!(e, VerbsError::NullPointer("the ibv_context"));
    // SAFETY: as above.
    let e = unsafe { IbverbsHal::from_raw_borrowed(&raw mut *c, core::ptr::null_mut(), 1) }.unwrap_err();
    assert_eq!(e, VerbsError::NullPointer("the ibv_pd"));
}
