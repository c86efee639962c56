//! # libudah-preload.so
//!
//! udah inside unmodified libibverbs programs:
//!
//! ```sh
//! LD_PRELOAD=libudah-preload.so ./server
//! ```
//!
//! The library exports `ibv_init_ah_from_wc`, `ibv_create_ah_from_wc` and
//! `ibv_destroy_ah` with libibverbs' own symbol versions
//! (`@@IBVERBS_1.1`, `preload.map` and the `.symver` directives below), so
//! the dynamic linker binds the program's calls (and libibverbs' internal
//! ones, which go through its PLT) to them. Everything else, and every case
//! it does not handle itself, goes to the real library, looked up with
//! `dlvsym(RTLD_NEXT, name, "IBVERBS_1.1")`.
//!
//! * `ibv_init_ah_from_wc`: the attribute comes from udah's bit-exact
//!   libibverbs profile against a GID-table snapshot of (context, port), read
//!   once with `ibv_query_gid_ex`. The preload cannot read the program's
//!   asynchronous events, so **each answer that uses the table is checked with
//!   one `ibv_query_gid_ex` of the chosen index** (the slot must still hold
//!   that GID with that type class); a mismatch re-reads the snapshot and
//!   computes again, and a second mismatch forwards the call. A search that
//!   finds nothing is forwarded (the table may have gained the address), and
//!   when the real call then succeeds the snapshot is re-read. So a returned
//!   index is never stale: it held the GID when the call returned, one
//!   query instead of libibverbs' two per slot scanned. (The index is the
//!   lowest match of the snapshot; a duplicate of the same GID and class
//!   added *below* it during the run, which a real port does not do, would
//!   not be seen until the next re-read. A search for the zero GID, which
//!   matches the lowest *empty* slot, is forwarded for that reason.)
//! * `ibv_create_ah_from_wc`: the same attribute, then by default a kernel
//!   AH of its own per call (only the attribute is udah's). With
//!   `UDAH_PRELOAD_SHARE=1`, one kernel AH per (PD, attribute, local GID),
//!   shared and reference counted. That is safe only when every destroy of
//!   such an AH goes through the interposed `ibv_destroy_ah` (not a
//!   `dlsym`-ed or statically linked libibverbs, which would free an AH
//!   another holder still uses): a second
//!   identical request returns the same `struct ibv_ah *` without a system
//!   call. AHs are never shared across PDs (an AH must be on its QP's PD).
//!   No lock is held across the real `ibv_create_ah`: two threads that
//!   race to create the same AH both create one, and the second to insert
//!   destroys its own and takes a reference on the first's.
//! * `ibv_destroy_ah`: on a shared AH drops one reference (under a short
//!   lock) and destroys the kernel AH with the last (after releasing it). An
//!   AH the preload did not create is forwarded after one lock-free lookup
//!   (`shared_set`); without `UDAH_PRELOAD_SHARE=1` the preload tracks no AH
//!   and every destroy is forwarded directly.
//!
//! The preload's locks are taken by `pthread_atfork` handlers around every
//! `fork` (`fork_lock`), so a child forked while another thread was inside
//! the preload can use it.
//!
//! `UDAH_PRELOAD=0`, `off`, `false` or `no` forwards everything (read once,
//! at the first call).
//! `UDAH_PRELOAD_STATS=1` prints one line of counters to stderr at exit.
//! Any internal failure or panic falls back to the real call.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod fork_lock;
mod shared_set;

use core::ffi::{c_char, c_int, c_void};
use core::panic::AssertUnwindSafe;
use core::sync::atomic::{AtomicU64, Ordering};
use std::collections::HashMap;
use std::panic::catch_unwind;
use std::sync::{Arc, OnceLock};

use fork_lock::ForkLock;
use shared_set::AhSet;

use udah::engine::{self, Gids};
use udah::ffi::{ibv_ah, ibv_ah_attr, ibv_context, ibv_grh, ibv_pd, ibv_wc};
use udah_core::ah::{IBV_WC_GRH, IbvAhAttr, libibverbs};
use udah_core::error::IbvError;
use udah_core::wire::{Area, Gid};
use udah_core::{GidType, LinkLayer};

// The exported names and versions. `preload.map` defines the version node.
core::arch::global_asm!(
    ".symver udah_preload_ibv_init_ah_from_wc, ibv_init_ah_from_wc@@IBVERBS_1.1, remove",
    ".symver udah_preload_ibv_create_ah_from_wc, ibv_create_ah_from_wc@@IBVERBS_1.1, remove",
    ".symver udah_preload_ibv_destroy_ah, ibv_destroy_ah@@IBVERBS_1.1, remove",
    ".symver udah_preload_stats, udah_preload_stats@@UDAH_PRELOAD_0.1",
);

type InitFn = unsafe extern "C" fn(*mut ibv_context, u8, *const ibv_wc, *const ibv_grh, *mut ibv_ah_attr) -> c_int;
type CreateFromWcFn = unsafe extern "C" fn(*mut ibv_pd, *const ibv_wc, *const ibv_grh, u8) -> *mut ibv_ah;
type CreateFn = unsafe extern "C" fn(*mut ibv_pd, *mut ibv_ah_attr) -> *mut ibv_ah;
type DestroyFn = unsafe extern "C" fn(*mut ibv_ah) -> c_int;

/// The real library's functions.
#[derive(Clone, Copy)]
struct Real {
    init: InitFn,
    create_from_wc: CreateFromWcFn,
    create: CreateFn,
    destroy: DestroyFn,
}

fn lookup(name: &core::ffi::CStr) -> *mut c_void {
    // glibc's RTLD_NEXT, `((void *) -1l)`.
    let next = core::ptr::without_provenance_mut::<c_void>(usize::MAX);
    // SAFETY: both strings are NUL-terminated; dlvsym has no other
    // precondition.
    unsafe { libc::dlvsym(next, name.as_ptr(), c"IBVERBS_1.1".as_ptr()) }
}

/// The real functions, looked up once. `None` if libibverbs is not next in
/// the search order (it always is: this library links it).
fn real() -> Option<Real> {
    static REAL: OnceLock<Option<Real>> = OnceLock::new();
    *REAL.get_or_init(|| {
        let (i, cw, c, d) = (
            lookup(c"ibv_init_ah_from_wc"),
            lookup(c"ibv_create_ah_from_wc"),
            lookup(c"ibv_create_ah"),
            lookup(c"ibv_destroy_ah"),
        );
        if i.is_null() || cw.is_null() || c.is_null() || d.is_null() {
            return None;
        }
        // SAFETY: the symbol is libibverbs' function of that name and
        // version, whose C prototype is the pointer type here.
        let init = unsafe { core::mem::transmute::<*mut c_void, InitFn>(i) };
        // SAFETY: as above.
        let create_from_wc = unsafe { core::mem::transmute::<*mut c_void, CreateFromWcFn>(cw) };
        // SAFETY: as above.
        let create = unsafe { core::mem::transmute::<*mut c_void, CreateFn>(c) };
        // SAFETY: as above.
        let destroy = unsafe { core::mem::transmute::<*mut c_void, DestroyFn>(d) };
        Some(Real { init, create_from_wc, create, destroy })
    })
}

/// Why a call went to the real library.
#[derive(Debug, Clone, Copy)]
#[repr(usize)]
enum Fallback {
    /// `UDAH_PRELOAD=0`, `off`, `false` or `no`.
    Disabled,
    /// A NULL argument (libibverbs' behaviour is kept, crash included).
    NullArgument,
    /// The GID table could not be read.
    Snapshot,
    /// The GID table is longer than udah's snapshot holds.
    TableTooLarge,
    /// No entry matched in the snapshot.
    NotFound,
    /// The chosen entry changed twice in a row.
    Validation,
    /// A search for the zero GID (only empty slots match it, and which slot
    /// is the lowest empty one is not something one query can confirm).
    ZeroGid,
    /// A panic inside the preload.
    Internal,
}

const FALLBACK_NAMES: [&str; 8] =
    ["disabled", "null_argument", "snapshot", "table_too_large", "not_found", "validation", "zero_gid", "internal"];

#[derive(Default)]
struct Stats {
    init_calls: AtomicU64,
    init_served: AtomicU64,
    create_calls: AtomicU64,
    kernel_ahs: AtomicU64,
    shared: AtomicU64,
    destroy_calls: AtomicU64,
    destroy_shared: AtomicU64,
    destroy_forwarded: AtomicU64,
    /// Creates that lost a race to insert the same AH (their AH was
    /// destroyed again).
    share_races: AtomicU64,
    /// Shared-mode AHs left unshared because the set was full.
    share_full: AtomicU64,
    validations: AtomicU64,
    refreshes: AtomicU64,
    fallbacks: [AtomicU64; 8],
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// The key of a shared AH: its PD, the attribute's 32 bytes and the local
/// GID the attribute's `sgid_index` held when it was checked.
type Key = (usize, [u8; 32], [u8; 16]);

#[derive(Default)]
struct Ahs {
    by_key: HashMap<Key, (usize, u64)>,
    by_ah: HashMap<usize, Key>,
    /// Addresses stored in the state's `AhSet` (changed only under this lock).
    live: usize,
}

struct State {
    enabled: bool,
    /// `UDAH_PRELOAD_SHARE=1`: identical requests share one kernel AH.
    share: bool,
    stats: Stats,
    snapshots: ForkLock<HashMap<(usize, u8), Arc<Gids>>>,
    ahs: ForkLock<Ahs>,
    /// The addresses in `ahs.by_ah`, for destroys that take no lock.
    set: &'static AhSet,
    /// The last line `udah_preload_stats` returned.
    line: ForkLock<Option<std::ffi::CString>>,
    generation: AtomicU64,
}

impl State {
    fn new(enabled: bool, share: bool, set: &'static AhSet) -> Self {
        State {
            enabled,
            share,
            stats: Stats::default(),
            snapshots: ForkLock::new(HashMap::new()),
            ahs: ForkLock::new(Ahs::default()),
            set,
            line: ForkLock::new(None),
            generation: AtomicU64::new(1),
        }
    }

    /// The locks in the order the fork handlers take them (no code path
    /// holds two of them at once, so any fixed order is deadlock-free).
    fn hold_for_fork(&self) {
        self.snapshots.hold_for_fork();
        self.ahs.hold_for_fork();
        self.line.hold_for_fork();
    }
}

/// Whether a `UDAH_PRELOAD` value leaves the preload on: `0`, `off`,
/// `false` and `no` (any case, surrounding blanks ignored) turn it off.
fn enabled_by(value: &str) -> bool {
    !matches!(value.trim().to_ascii_lowercase().as_str(), "0" | "off" | "false" | "no")
}

static STATE: OnceLock<State> = OnceLock::new();

fn state() -> &'static State {
    static SET: AhSet = AhSet::new();
    STATE.get_or_init(|| {
        State::new(
            std::env::var("UDAH_PRELOAD").map_or(true, |v| enabled_by(&v)),
            std::env::var("UDAH_PRELOAD_SHARE").is_ok_and(|v| v.trim() == "1"),
            &SET,
        )
    })
}

/// Whether the prepare handler took the locks (the state exists from load
/// on, but the parent and child handlers must release exactly what it took).
static FORK_HELD: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

extern "C" fn before_fork() {
    if let Some(st) = STATE.get() {
        st.hold_for_fork();
        FORK_HELD.store(true, Ordering::Relaxed);
    }
}

extern "C" fn after_fork_in_parent() {
    if FORK_HELD.swap(false, Ordering::Relaxed)
        && let Some(st) = STATE.get()
    {
        // SAFETY: `before_fork` took the three locks in this thread.
        unsafe { st.line.release_in_parent() };
        // SAFETY: as above.
        unsafe { st.ahs.release_in_parent() };
        // SAFETY: as above.
        unsafe { st.snapshots.release_in_parent() };
    }
}

extern "C" fn after_fork_in_child() {
    if FORK_HELD.swap(false, Ordering::Relaxed)
        && let Some(st) = STATE.get()
    {
        // SAFETY: the child of a fork whose prepare handler took the three
        // locks in the thread that is now the child's only thread.
        unsafe { st.line.reset_in_child() };
        // SAFETY: as above.
        unsafe { st.ahs.reset_in_child() };
        // SAFETY: as above.
        unsafe { st.snapshots.reset_in_child() };
    }
}

fn fallback(why: Fallback) {
    if let Some(c) = state().stats.fallbacks.get(why as usize) {
        bump(c);
    }
}

fn set_errno(e: i32) {
    // SAFETY: `__errno_location` has no preconditions.
    let slot = unsafe { libc::__errno_location() };
    // SAFETY: the calling thread's errno slot, valid for writes.
    unsafe { slot.write(e) };
}

/// One line of counters.
pub fn stats_line() -> String {
    stats_line_of(state())
}

fn stats_line_of(st: &State) -> String {
    let s = &st.stats;
    let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let mut line = format!(
        "udah-preload: enabled={} init_ah_from_wc={} served={} create_ah_from_wc={} kernel_ahs={} shared={} \
         destroy_ah={} destroy_shared={} destroy_forwarded={} share_races={} share_full={} gid_validations={} \
         snapshot_reads={}",
        u8::from(st.enabled),
        ld(&s.init_calls),
        ld(&s.init_served),
        ld(&s.create_calls),
        ld(&s.kernel_ahs),
        ld(&s.shared),
        ld(&s.destroy_calls),
        ld(&s.destroy_shared),
        ld(&s.destroy_forwarded),
        ld(&s.share_races),
        ld(&s.share_full),
        ld(&s.validations),
        ld(&s.refreshes),
    );
    for (name, c) in FALLBACK_NAMES.iter().zip(&s.fallbacks) {
        line += &format!(" fallback_{name}={}", ld(c));
    }
    line
}

extern "C" fn print_stats() {
    // Never unwind out of an atexit handler.
    let _ = catch_unwind(|| {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "{}", stats_line());
    });
}

/// Runs at load: reads the environment once, looks up the real functions
/// (so that no thread is inside a one-time initialisation when the program
/// forks), registers the fork handlers and the exit report.
extern "C" fn on_load() {
    let _ = catch_unwind(|| {
        let _ = state();
        let _ = real();
        // SAFETY: three `extern "C" fn()` that never unwind (they only lock
        // and unlock).
        unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork_in_parent), Some(after_fork_in_child)) };
        if std::env::var("UDAH_PRELOAD_STATS").is_ok_and(|v| v == "1") {
            // SAFETY: `print_stats` is an `extern "C" fn()` that never unwinds.
            unsafe { libc::atexit(print_stats) };
        }
    });
}

#[used]
#[unsafe(link_section = ".init_array")]
static ON_LOAD: extern "C" fn() = on_load;

/// The snapshot of (ctx, port), read now when absent or when `fresh`.
fn snapshot(ctx: *mut ibv_context, port: u8, fresh: bool) -> Result<Arc<Gids>, Fallback> {
    let st = state();
    let key = (ctx.expose_provenance(), port);
    if !fresh && let Some(s) = st.snapshots.lock().get(&key) {
        return Ok(s.clone());
    }
    bump(&st.stats.refreshes);
    let generation = st.generation.fetch_add(1, Ordering::Relaxed);
    // SAFETY: `ctx` is the program's live context (it passed it to a verb).
    match unsafe { engine::read_gids(ctx, port, generation) } {
        Ok(t) => {
            let t: Arc<Gids> = Arc::from(t);
            st.snapshots.lock().insert(key, t.clone());
            Ok(t)
        }
        Err(e) => {
            st.snapshots.lock().remove(&key);
            Err(if e.0 == libc::E2BIG { Fallback::TableTooLarge } else { Fallback::Snapshot })
        }
    }
}

/// Whether slot `index` still holds `gid` with the type class `want_v2`
/// (an empty slot stands for the zero GID of class v1): one
/// `ibv_query_gid_ex`.
fn still_holds(ctx: *mut ibv_context, port: u8, index: u32, gid: &Gid, want_v2: bool) -> bool {
    bump(&state().stats.validations);
    // SAFETY: `ctx` is the program's live context.
    match unsafe { engine::query_gid(ctx, port, index) } {
        Ok(Some(e)) => e.gid == *gid && (e.gid_type == GidType::RoceV2) == want_v2,
        Ok(None) => *gid == Gid::ZERO && !want_v2,
        Err(_) => false,
    }
}

/// What udah decided for one `ibv_init_ah_from_wc`.
enum Answer {
    /// The attribute, the return value and errno, and the local GID when the
    /// table was used.
    Done(IbvAhAttr, c_int, i32, Option<Gid>),
    /// Forward to the real library.
    Forward(Fallback),
}

/// The attribute without the GRH flag does not read the table.
static NO_TABLE: Gids = Gids::new(0, LinkLayer::Infiniband, 0);

fn decide(ctx: *mut ibv_context, port: u8, wc: &ibv_wc, area: &Area) -> Answer {
    let wc = udah::wc_from_c(wc);
    if wc.wc_flags & IBV_WC_GRH == 0 {
        return match libibverbs::init_ah_from_wc(&NO_TABLE, port, &wc, Some(area)) {
            Ok(a) => Answer::Done(a, 0, 0, None),
            Err(f) => Answer::Done(f.attr, -1, f.error.errno(), None),
        };
    }
    let c = libibverbs::classify(area);
    if c.verdict == libibverbs::Verdict::Search && c.local == Gid::ZERO {
        return Answer::Forward(Fallback::ZeroGid);
    }
    let mut fresh = false;
    loop {
        let table = match snapshot(ctx, port, fresh) {
            Ok(t) => t,
            Err(why) => return Answer::Forward(why),
        };
        match libibverbs::init_ah_from_wc(&table, port, &wc, Some(area)) {
            Ok(a) => {
                let Some(index) = table.find_libibverbs(port, &c.local, c.want_v2) else {
                    // Cannot happen (the profile found it); do not guess.
                    return Answer::Forward(Fallback::Internal);
                };
                if still_holds(ctx, port, index, &c.local, c.want_v2) {
                    return Answer::Done(a, 0, 0, Some(c.local));
                }
                if fresh {
                    return Answer::Forward(Fallback::Validation);
                }
                fresh = true;
            }
            // The table may have gained the address since the snapshot:
            // the real library scans it (and sets its errno).
            Err(f) if f.error == IbvError::GidNotFound => return Answer::Forward(Fallback::NotFound),
            // Decided by the bytes alone, before any GID query.
            Err(f) => return Answer::Done(f.attr, -1, f.error.errno(), None),
        }
    }
}

/// `decide`, with every panic turned into a fallback.
fn decide_guarded(ctx: *mut ibv_context, port: u8, wc: &ibv_wc, area: &Area) -> Answer {
    catch_unwind(AssertUnwindSafe(|| decide(ctx, port, wc, area))).unwrap_or(Answer::Forward(Fallback::Internal))
}

/// The real `ibv_init_ah_from_wc` after a fallback; when it finds what the
/// snapshot missed, the snapshot is re-read for the next call.
///
/// # Safety
/// The arguments are the program's, passed on unchanged.
unsafe fn forward_init(
    real: &Real,
    ctx: *mut ibv_context,
    port: u8,
    wc: *const ibv_wc,
    grh: *const ibv_grh,
    attr: *mut ibv_ah_attr,
    why: Fallback,
) -> c_int {
    fallback(why);
    // SAFETY: the program's arguments, unchanged.
    let rc = unsafe { (real.init)(ctx, port, wc, grh, attr) };
    if rc == 0 && matches!(why, Fallback::NotFound) {
        let _ = catch_unwind(|| snapshot(ctx, port, true));
    }
    rc
}

/// The attribute for `ibv_init_ah_from_wc` / `ibv_create_ah_from_wc`:
/// (return value, local GID when udah used the table). errno is set as
/// libibverbs sets it on failure.
///
/// # Safety
/// The arguments are the program's: `wc`, `grh` and `attr` valid when not
/// NULL, `ctx` a live context.
unsafe fn init(
    real: &Real,
    ctx: *mut ibv_context,
    port: u8,
    wc: *const ibv_wc,
    grh: *const ibv_grh,
    attr: *mut ibv_ah_attr,
) -> (c_int, Option<Gid>) {
    let st = state();
    bump(&st.stats.init_calls);
    if !st.enabled {
        // SAFETY: forwarded unchanged.
        return (unsafe { forward_init(real, ctx, port, wc, grh, attr, Fallback::Disabled) }, None);
    }
    // SAFETY: `wc` is NULL or valid for reads (the contract).
    let w = unsafe { wc.as_ref() };
    // SAFETY: `grh` is NULL or valid for reads (the contract).
    let g = unsafe { grh.as_ref() };
    let (Some(w), Some(g)) = (w, g) else {
        // SAFETY: forwarded unchanged (libibverbs' NULL behaviour is kept).
        return (unsafe { forward_init(real, ctx, port, wc, grh, attr, Fallback::NullArgument) }, None);
    };
    if ctx.is_null() || attr.is_null() {
        // SAFETY: forwarded unchanged.
        return (unsafe { forward_init(real, ctx, port, wc, grh, attr, Fallback::NullArgument) }, None);
    }
    match decide_guarded(ctx, port, w, &g.bytes) {
        Answer::Done(a, rc, e, local) => {
            // SAFETY: `attr` is valid for writes of the 32-byte struct.
            unsafe { attr.write(ibv_ah_attr { attr: a }) };
            if rc != 0 {
                set_errno(e);
            }
            bump(&st.stats.init_served);
            (rc, local)
        }
        // SAFETY: forwarded unchanged.
        Answer::Forward(why) => (unsafe { forward_init(real, ctx, port, wc, grh, attr, why) }, None),
    }
}

/// `ibv_init_ah_from_wc@@IBVERBS_1.1`.
///
/// # Safety
/// libibverbs' contract for `ibv_init_ah_from_wc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_preload_ibv_init_ah_from_wc(
    ctx: *mut ibv_context,
    port: u8,
    wc: *const ibv_wc,
    grh: *const ibv_grh,
    attr: *mut ibv_ah_attr,
) -> c_int {
    let Some(real) = real() else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: the program's arguments under libibverbs' contract.
    unsafe { init(&real, ctx, port, wc, grh, attr) }.0
}

/// The 32 bytes of `struct ibv_ah_attr` (the struct has no padding).
fn attr_bytes(a: &IbvAhAttr) -> [u8; 32] {
    let g = &a.grh;
    let mut b = [0u8; 32];
    b[..16].copy_from_slice(&g.dgid);
    b[16..20].copy_from_slice(&g.flow_label.to_le_bytes());
    b[20..24].copy_from_slice(&[g.sgid_index, g.hop_limit, g.traffic_class, g.reserved]);
    b[24..26].copy_from_slice(&a.dlid.to_le_bytes());
    b[26..32].copy_from_slice(&[a.sl, a.src_path_bits, a.static_rate, a.is_global, a.port_num, a.reserved]);
    b
}

/// A shared AH for (PD, attribute, local GID): a new reference on the
/// existing one, or a new one from the real `ibv_create_ah`.
fn shared_ah(st: &State, real: &Real, pd: *mut ibv_pd, attr: &mut ibv_ah_attr, local: Gid) -> *mut ibv_ah {
    let key: Key = (pd.expose_provenance(), attr_bytes(&attr.attr), local.0);
    let reference = |ahs: &mut Ahs| {
        let (ah, refs) = ahs.by_key.get_mut(&key)?;
        *refs += 1;
        Some(*ah)
    };
    if let Some(ah) = reference(&mut st.ahs.lock()) {
        bump(&st.stats.shared);
        return core::ptr::with_exposed_provenance_mut(ah);
    }
    // Created without the lock: a create (a system call) never makes other
    // threads' creates and destroys wait.
    // SAFETY: the program's PD and a valid attribute.
    let ah = unsafe { (real.create)(pd, attr) };
    if ah.is_null() {
        return ah;
    }
    bump(&st.stats.kernel_ahs);
    let addr = ah.expose_provenance();
    let mut ahs = st.ahs.lock();
    if let Some(existing) = reference(&mut ahs) {
        // Another thread inserted the same AH meanwhile: use it, drop ours.
        drop(ahs);
        bump(&st.stats.shared);
        bump(&st.stats.share_races);
        // SAFETY: the AH made just above, which no one else has seen.
        unsafe { (real.destroy)(ah) };
        return core::ptr::with_exposed_provenance_mut(existing);
    }
    let Ahs { by_key, by_ah, live } = &mut *ahs;
    if !st.set.insert(live, addr) {
        // Not tracked: the program holds an AH of its own, whose destroy is
        // forwarded.
        bump(&st.stats.share_full);
        return ah;
    }
    by_key.insert(key, (addr, 1));
    by_ah.insert(addr, key);
    ah
}

/// `ibv_create_ah_from_wc@@IBVERBS_1.1`.
///
/// # Safety
/// libibverbs' contract for `ibv_create_ah_from_wc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_preload_ibv_create_ah_from_wc(
    pd: *mut ibv_pd,
    wc: *const ibv_wc,
    grh: *const ibv_grh,
    port: u8,
) -> *mut ibv_ah {
    let Some(real) = real() else {
        set_errno(libc::ENOSYS);
        return core::ptr::null_mut();
    };
    let st = state();
    bump(&st.stats.create_calls);
    if !st.enabled || pd.is_null() {
        fallback(if st.enabled { Fallback::NullArgument } else { Fallback::Disabled });
        // SAFETY: forwarded unchanged.
        return unsafe { (real.create_from_wc)(pd, wc, grh, port) };
    }
    // SAFETY: `struct ibv_pd` starts with `struct ibv_context *context`
    // (public verbs.h), and `pd` is the program's live PD.
    let ctx = unsafe { pd.cast::<*mut ibv_context>().read() };
    let mut attr = ibv_ah_attr { attr: IbvAhAttr::default() };
    // SAFETY: the program's arguments; `attr` is a valid local.
    let (rc, local) = unsafe { init(&real, ctx, port, wc, grh, &mut attr) };
    if rc != 0 {
        return core::ptr::null_mut();
    }
    match local {
        Some(local) if st.share => catch_unwind(AssertUnwindSafe(|| shared_ah(st, &real, pd, &mut attr, local)))
            .unwrap_or_else(|_| {
                fallback(Fallback::Internal);
                // SAFETY: the program's PD and a valid attribute.
                unsafe { (real.create)(pd, &mut attr) }
            }),
        // Sharing is off (the default), or the attribute came from the real
        // library (or needs no GID): an AH of its own, as libibverbs makes.
        _ => {
            // SAFETY: the program's PD and a valid attribute.
            let ah = unsafe { (real.create)(pd, &mut attr) };
            if !ah.is_null() {
                bump(&st.stats.kernel_ahs);
            }
            ah
        }
    }
}

/// `ibv_destroy_ah@@IBVERBS_1.1`.
///
/// # Safety
/// libibverbs' contract for `ibv_destroy_ah`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_preload_ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    let Some(real) = real() else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: libibverbs' contract, forwarded.
    unsafe { destroy(state(), &real, ah) }
}

/// `ibv_destroy_ah` with the state `st` and the real library `real`.
///
/// # Safety
/// libibverbs' contract for `ibv_destroy_ah`.
unsafe fn destroy(st: &State, real: &Real, ah: *mut ibv_ah) -> c_int {
    bump(&st.stats.destroy_calls);
    let addr = ah.expose_provenance();
    // Without sharing the preload holds no AH; with it, an AH that is not
    // in the set is not the preload's. Either way no lock is taken.
    if !st.share || !st.set.contains(addr) {
        bump(&st.stats.destroy_forwarded);
        // SAFETY: forwarded unchanged.
        return unsafe { (real.destroy)(ah) };
    }
    let last = catch_unwind(AssertUnwindSafe(|| {
        let mut ahs = st.ahs.lock();
        let Ahs { by_key, by_ah, live } = &mut *ahs;
        let key = *by_ah.get(&addr)?;
        let (_, refs) = by_key.get_mut(&key)?;
        *refs -= 1;
        if *refs > 0 {
            return Some(false);
        }
        by_key.remove(&key);
        by_ah.remove(&addr);
        st.set.remove(live, addr);
        Some(true)
    }));
    match last {
        Ok(Some(false)) => {
            bump(&st.stats.destroy_shared);
            0
        }
        // The last reference of a shared AH: the kernel AH goes, after the
        // lock is released.
        // SAFETY: an AH the real library created and nobody holds any more.
        Ok(Some(true)) => unsafe { (real.destroy)(ah) },
        // Not found under the lock (cannot happen: the set and the maps
        // change together) or a panic: the real library's business.
        _ => {
            bump(&st.stats.destroy_forwarded);
            // SAFETY: forwarded unchanged.
            unsafe { (real.destroy)(ah) }
        }
    }
}

/// The counters line (also what `UDAH_PRELOAD_STATS=1` prints), for a
/// program that wants it earlier. Returns a static, NUL-terminated copy
/// valid until the next call.
#[unsafe(no_mangle)]
pub extern "C" fn udah_preload_stats() -> *const c_char {
    let st = state();
    let line = std::ffi::CString::new(stats_line_of(st)).unwrap_or_default();
    let mut g = st.line.lock();
    g.insert(line).as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udah_preload_off_values() {
        for v in ["0", "off", "false", "no", "OFF", " No "] {
            assert!(!enabled_by(v), "{v:?}");
        }
        for v in ["1", "on", "", "yes"] {
            assert!(enabled_by(v), "{v:?}");
        }
    }
    use core::sync::atomic::AtomicUsize;

    static CREATED: AtomicUsize = AtomicUsize::new(0);
    static DESTROYED: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn no_init(
        _: *mut ibv_context,
        _: u8,
        _: *const ibv_wc,
        _: *const ibv_grh,
        _: *mut ibv_ah_attr,
    ) -> c_int {
        -1
    }
    unsafe extern "C" fn no_create_from_wc(_: *mut ibv_pd, _: *const ibv_wc, _: *const ibv_grh, _: u8) -> *mut ibv_ah {
        core::ptr::null_mut()
    }
    unsafe extern "C" fn fake_create(_: *mut ibv_pd, _: *mut ibv_ah_attr) -> *mut ibv_ah {
        CREATED.fetch_add(1, Ordering::SeqCst);
        Box::into_raw(Box::new(0u64)).cast()
    }
    unsafe extern "C" fn fake_destroy(ah: *mut ibv_ah) -> c_int {
        DESTROYED.fetch_add(1, Ordering::SeqCst);
        // SAFETY: every AH here comes from a `Box<u64>` (fake_create, or
        // the test's own "foreign" AH).
        drop(unsafe { Box::from_raw(ah.cast::<u64>()) });
        0
    }

    fn d(st: &State, real: &Real, ah: *mut ibv_ah) -> c_int {
        // SAFETY: every AH of these tests is a live `Box<u64>` the fakes
        // understand, destroyed once.
        unsafe { destroy(st, real, ah) }
    }

    #[test]
    fn shared_ahs_are_reference_counted_per_pd_and_foreign_ones_forwarded() {
        let real =
            Real { init: no_init, create_from_wc: no_create_from_wc, create: fake_create, destroy: fake_destroy };
        let st: &State = Box::leak(Box::new(State::new(true, true, Box::leak(Box::new(AhSet::new())))));
        let (pd1, pd2) = (8usize as *mut ibv_pd, 16usize as *mut ibv_pd);
        let mut attr = ibv_ah_attr { attr: IbvAhAttr { is_global: 1, port_num: 1, ..IbvAhAttr::default() } };
        let gid = Gid::from_ipv4([10, 0, 0, 1]);

        let a = shared_ah(st, &real, pd1, &mut attr, gid);
        let b = shared_ah(st, &real, pd1, &mut attr, gid);
        let other_pd = shared_ah(st, &real, pd2, &mut attr, gid);
        let other_gid = shared_ah(st, &real, pd1, &mut attr, Gid::from_ipv4([10, 0, 0, 9]));
        assert_eq!(a, b);
        assert!(a != other_pd && a != other_gid && other_pd != other_gid);
        assert_eq!(CREATED.load(Ordering::SeqCst), 3);

        assert_eq!(d(st, &real, b), 0);
        assert_eq!(DESTROYED.load(Ordering::SeqCst), 0, "a reference remains");
        assert_eq!(d(st, &real, a), 0);
        assert_eq!(DESTROYED.load(Ordering::SeqCst), 1, "the last reference destroys the kernel AH");
        // An AH the preload did not make goes to the real library.
        let foreign: *mut ibv_ah = Box::into_raw(Box::new(0u64)).cast();
        assert_eq!(d(st, &real, foreign), 0);
        assert_eq!(DESTROYED.load(Ordering::SeqCst), 2);
        assert_eq!(d(st, &real, other_pd), 0);
        assert_eq!(d(st, &real, other_gid), 0);
        assert_eq!(DESTROYED.load(Ordering::SeqCst), 4);
        assert!(st.ahs.lock().by_ah.is_empty());
        let line = stats_line_of(st);
        assert!(
            line.contains("kernel_ahs=3 shared=1") && line.contains("destroy_shared=1 destroy_forwarded=1"),
            "{line}"
        );
    }

    #[test]
    fn attribute_bytes_are_the_c_image() {
        let a = IbvAhAttr { dlid: 0x1234, sl: 5, port_num: 1, is_global: 1, ..IbvAhAttr::default() };
        let b = attr_bytes(&a);
        assert_eq!((b[24], b[25], b[26], b[29], b[30]), (0x34, 0x12, 5, 1, 1));
    }
}
