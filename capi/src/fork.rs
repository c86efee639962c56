//! Fork safety: `fork` happens between libudah calls, never inside one.
//!
//! A responder's shared state has short windows in which one thread owns a
//! piece of it: a table slot being created (other threads asking for the
//! same AH wait for that create), the table's claim flag, a slot's `BUSY`
//! bit, the snapshot mutex. A child forked while another thread is inside
//! such a window inherits it owned by a thread that does not exist there,
//! and its first call on that piece waits for ever.
//!
//! So every such window is a [`Call`]: a miss (from the failed look-up to the
//! created AH), a slot's `BUSY` transition, anything under the snapshot
//! mutex, a refresh, a retirement sweep, `close`. It counts itself in flight
//! on its thread's stripe of [`IN_FLIGHT`] for its duration. The
//! `pthread_atfork` *prepare* handler raises [`FORKING`] (windows that open
//! after it wait at their entry, holding nothing) and waits until none is in
//! flight; the *parent* handler lowers it; the *child* handler clears both
//! (its only thread is the forking one, which was in no window). Calls never
//! wait for each other through this: only a fork waits, for the windows
//! already open (including a create in the kernel) to close. A hit on a
//! slot that has references out opens no window: one CAS on the slot's
//! count, which a fork cannot split.
//!
//! The cost of a window is two uncontended atomic read-modify-writes on a
//! cache line of its own thread's stripe (64 stripes, assigned round-robin
//! to threads) and a load of the flag.

use core::cell::Cell;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;

/// Padded to its own cache line, so that threads on different stripes do not
/// share one.
#[repr(align(128))]
struct Stripe(AtomicU64);

/// How many stripes the in-flight count is spread over.
const STRIPES: usize = 64;

/// Calls in flight, per stripe of threads.
static IN_FLIGHT: [Stripe; STRIPES] = [const { Stripe(AtomicU64::new(0)) }; STRIPES];

/// Forks between their prepare and parent handlers.
static FORKING: AtomicU32 = AtomicU32::new(0);

/// The next thread's stripe.
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

/// The handlers are registered once per process, at the first call.
static REGISTER: Once = Once::new();

std::thread_local! {
    /// This thread's stripe (`usize::MAX` until its first window) and how
    /// many of its windows are open (nested ones included).
    static MINE: (Cell<usize>, Cell<u32>) = const { (Cell::new(usize::MAX), Cell::new(0)) };
}

/// This thread's stripe, and whether it is already in a window (a nested
/// one must not wait for a fork: the fork waits for the outer one).
fn stripe() -> (&'static AtomicU64, bool) {
    let (i, nested) = MINE
        .try_with(|(s, depth)| {
            if s.get() == usize::MAX {
                s.set(NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % STRIPES);
            }
            let nested = depth.get() > 0;
            depth.set(depth.get().saturating_add(1));
            (s.get(), nested)
        })
        // A thread whose locals are gone (exiting) shares stripe 0 and is
        // taken as not nested.
        .unwrap_or((0, false));
    (&IN_FLIGHT[i % STRIPES].0, nested)
}

/// A libudah call in flight: a fork waits until it is dropped.
#[derive(Debug)]
#[must_use = "a call is in flight only while its guard lives"]
pub(crate) struct Call(&'static AtomicU64);

/// Starts a call: waits while a fork is being prepared, then counts the call
/// in flight until the returned guard is dropped.
pub(crate) fn enter() -> Call {
    REGISTER.call_once(register);
    let (s, nested) = stripe();
    loop {
        // Sequentially consistent, with the prepare handler's: either it
        // sees this count, or this call sees its flag (and backs off).
        s.fetch_add(1, Ordering::SeqCst);
        if nested || FORKING.load(Ordering::SeqCst) == 0 {
            return Call(s);
        }
        s.fetch_sub(1, Ordering::SeqCst);
        while FORKING.load(Ordering::Acquire) != 0 {
            std::thread::yield_now();
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
        let _ = MINE.try_with(|(_, depth)| depth.set(depth.get().saturating_sub(1)));
    }
}

fn register() {
    // SAFETY: the three handlers are `extern "C"` functions without
    // arguments that only touch the atomics of this module.
    let rc = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
    // Only ENOMEM can fail it, at the first call of a process out of
    // memory: forks then happen without the wait, as without libudah.
    HANDLERS.store(rc == 0, Ordering::Relaxed);
}

/// Whether the handlers are registered (tests).
static HANDLERS: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

extern "C" fn prepare() {
    FORKING.fetch_add(1, Ordering::SeqCst);
    for s in &IN_FLIGHT {
        while s.0.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
    }
}

extern "C" fn parent() {
    FORKING.fetch_sub(1, Ordering::SeqCst);
}

extern "C" fn child() {
    // The child's one thread was in no call (the prepare handler waited for
    // every call to end); a count raised by a thread that was only backing
    // off at its entry, and that does not exist here, is dropped.
    for s in &IN_FLIGHT {
        s.0.store(0, Ordering::Relaxed);
    }
    let _ = MINE.try_with(|(_, depth)| depth.set(0));
    FORKING.store(0, Ordering::SeqCst);
}

/// Calls in flight now (tests).
#[cfg(test)]
pub(crate) fn in_flight() -> u64 {
    IN_FLIGHT.iter().map(|s| s.0.load(Ordering::SeqCst)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nested_window_does_not_wait_for_a_fork_that_waits_for_its_outer_one() {
        let outer = enter();
        FORKING.fetch_add(1, Ordering::SeqCst);
        // A fork is being prepared: a new window on another thread would
        // wait, a nested one on this thread must not.
        let inner = enter();
        drop(inner);
        FORKING.fetch_sub(1, Ordering::SeqCst);
        drop(outer);
        assert_eq!(MINE.with(|(_, d)| d.get()), 0);
    }

    #[test]
    fn a_fork_waits_for_calls_in_flight_and_the_child_can_call() {
        let call = enter();
        assert!(HANDLERS.load(Ordering::Relaxed));
        assert!(in_flight() >= 1);
        // A fork from another thread waits in `prepare` until `call` ends.
        let forked = core::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let t = s.spawn(|| {
                // SAFETY: the child only calls async-signal-safe functions
                // (`_exit`) after the fork.
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    // The child: its calls do not wait for the parent's.
                    let c = enter();
                    drop(c);
                    // SAFETY: `_exit` is async-signal-safe and ends the child.
                    unsafe { libc::_exit(0) };
                }
                forked.store(true, Ordering::SeqCst);
                pid
            });
            std::thread::sleep(core::time::Duration::from_millis(100));
            assert!(!forked.load(Ordering::SeqCst), "fork did not wait for the call in flight");
            drop(call);
            let pid = t.join().unwrap();
            assert!(pid > 0);
            let mut status = 0;
            // SAFETY: `pid` is this process's child; `status` is a valid
            // out-pointer.
            let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
            assert_eq!(rc, pid);
            assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child status {status}");
        });
    }
}
