//! A mutex the `pthread_atfork` handlers can hold across `fork`.
//!
//! A `std::sync::Mutex` held by another thread when the program forks stays
//! locked for ever in the child (only the forking thread exists there), and
//! its guard cannot be taken or released from a C callback. This one is a
//! plain `pthread_mutex_t`: the *prepare* handler takes it (so no other
//! thread is inside a critical section when the address space is copied),
//! the *parent* handler releases it, and the *child* handler re-initialises
//! it, which POSIX allows for a mutex whose holder is the forking thread.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};

/// A mutex over `T` built on `pthread_mutex_t`. It must not move after its
/// first use: it lives in a `static` (or, in tests, a leaked `Box`).
pub(crate) struct ForkLock<T> {
    raw: UnsafeCell<libc::pthread_mutex_t>,
    data: UnsafeCell<T>,
    /// How often `lock` was called (tests check which paths take it).
    #[cfg(test)]
    pub(crate) locks: core::sync::atomic::AtomicU64,
}

// SAFETY: `data` is only reached through a `Guard`, and a guard exists only
// while `raw` is held, so at most one thread touches `data` at a time (the
// contract of `std::sync::Mutex`, whose bounds these are).
unsafe impl<T: Send> Sync for ForkLock<T> {}
// SAFETY: as above; the mutex itself may be handed to another thread.
unsafe impl<T: Send> Send for ForkLock<T> {}

impl<T> ForkLock<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self {
            raw: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
            data: UnsafeCell::new(value),
            #[cfg(test)]
            locks: core::sync::atomic::AtomicU64::new(0),
        }
    }

    pub(crate) fn lock(&self) -> Guard<'_, T> {
        #[cfg(test)]
        self.locks.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        // SAFETY: `raw` is an initialised default (non-recursive) mutex that
        // stays at this address (the type's rule). Locking it can only fail
        // with EINVAL for an uninitialised mutex, which it is not.
        unsafe { libc::pthread_mutex_lock(self.raw.get()) };
        Guard { lock: self, _here: core::marker::PhantomData }
    }

    /// Takes the mutex without a guard: the `pthread_atfork` prepare
    /// handler's half of [`ForkLock::release_in_parent`] /
    /// [`ForkLock::reset_in_child`].
    pub(crate) fn hold_for_fork(&self) {
        // SAFETY: as in `lock`.
        unsafe { libc::pthread_mutex_lock(self.raw.get()) };
    }

    /// Releases the mutex taken by [`ForkLock::hold_for_fork`].
    ///
    /// # Safety
    /// The calling thread holds it through `hold_for_fork` (the parent
    /// handler runs in the thread that ran the prepare handler).
    pub(crate) unsafe fn release_in_parent(&self) {
        // SAFETY: held by this thread (the contract), so unlocking it is
        // the matching half of the lock.
        unsafe { libc::pthread_mutex_unlock(self.raw.get()) };
    }

    /// Makes the mutex unlocked again in a forked child.
    ///
    /// # Safety
    /// Only in the child handler of a fork whose prepare handler ran
    /// [`ForkLock::hold_for_fork`]: the child's only thread is the one that
    /// held it, and nothing else can be waiting on it.
    pub(crate) unsafe fn reset_in_child(&self) {
        // SAFETY: no thread of this process uses the mutex now (the
        // contract); writing the initialiser makes it a fresh, unlocked
        // mutex, and the data it guards is consistent because the prepare
        // handler took it between critical sections.
        unsafe { self.raw.get().write(libc::PTHREAD_MUTEX_INITIALIZER) };
    }
}

/// Holds a [`ForkLock`]; releases it when dropped.
pub(crate) struct Guard<'a, T> {
    lock: &'a ForkLock<T>,
    /// Not `Send`: the thread that locked the mutex must unlock it.
    _here: core::marker::PhantomData<*const ()>,
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the mutex: no other reference to `data`
        // exists while it lives.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only one.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: this guard's thread locked the mutex in `lock`.
        unsafe { libc::pthread_mutex_unlock(self.lock.raw.get()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_serialise_and_fork_halves_pair_up() {
        let l = Box::leak(Box::new(ForkLock::new(0u32)));
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        *l.lock() += 1;
                    }
                });
            }
        });
        assert_eq!(*l.lock(), 4000);
        l.hold_for_fork();
        // SAFETY: held just above by this thread.
        unsafe { l.release_in_parent() };
        l.hold_for_fork();
        // SAFETY: held by this thread, and no other thread uses `l` (the
        // situation of a fork child).
        unsafe { l.reset_in_child() };
        *l.lock() += 1;
        assert_eq!(*l.lock(), 4001);
    }
}
