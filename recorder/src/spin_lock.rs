//! The profiler's lock, and the order in which its locks may be taken.
//!
//! [`SpinLock`] never calls the allocator and has no destructor, so it may be
//! taken inside malloc's slow path and be reset in a forked child. The
//! malloc/free fast paths never take one.
//!
//! Inside malloc a thread must never wait long for a lock that a thread of
//! lower priority holds (a real-time thread spinning and yielding on the
//! same CPU as a preempted holder would wait until the kernel throttles it).
//! So after a short spin a waiter sleeps in the kernel on a
//! priority-inheriting futex (`FUTEX_LOCK_PI`): the holder runs at the
//! waiter's priority until it releases, and the wait is bounded by the
//! holder's critical section. The lock word holds the owner's thread id, as
//! the kernel requires; where PI futexes are unavailable the waiter spins
//! and yields.
//!
//! Every lock has a [`LockClass`]; [`LOCK_ORDER`] lists them with their rank,
//! who takes them and whether inside malloc. A thread may only take a lock
//! of a higher rank than every lock it holds. Builds with debug assertions
//! (and the unit tests) check on every acquisition that it does, and that a
//! lock whose row says `inside_malloc: false` is not taken inside a
//! malloc-family hook; and at every hook's entry and exit, as jemalloc's
//! `check_entry_exit_locking` does, that a hook entered from the program
//! finds and leaves the profiler's locks free ([`enter_hook`]).
//! `scripts/test.sh` runs end-to-end tests under the debug shim for that;
//! release builds check nothing and pay nothing. The fork handlers take
//! every lock but the dump lock in rank order (`lifecycle`).

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicU32, Ordering};

/// The profiler's locks, lowest rank (taken first) first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum LockClass {
    /// `writer`: serializes dumps; true once the process is exiting.
    Dump = 0,
    /// `modules`: the history of loaded objects.
    Modules = 1,
    /// `threads`: the registry of threads and their counters.
    Threads = 2,
    /// `stack_table`: inserting a stack never seen before.
    StackInsert = 3,
    /// `table_setup`: making the tables at the first sample.
    TableSetup = 4,
    /// `own_heap`: the profiler's own allocations.
    OwnHeap = 5,
}

/// One row of the lock-order table.
pub struct LockInfo {
    /// The lock.
    pub class: LockClass,
    /// Where it lives.
    pub name: &'static str,
    /// Who takes it.
    pub taken_by: &'static str,
    /// Whether code inside malloc (the sample event, thread set-up) may
    /// take it: debug builds refuse the others inside a hook
    /// ([`enter_hook`]).
    pub inside_malloc: bool,
}

/// Every lock, in rank order: while holding a lock, a thread may only take
/// locks further down this list.
pub const LOCK_ORDER: [LockInfo; 6] = [
    LockInfo {
        class: LockClass::Dump,
        name: "dump_sequence::DUMP_LOCK",
        taken_by: "whoever writes a dump (dumper thread, heapsample_dump, the exit \
                   handler); never around fork (fork must not wait for a dump): \
                   a forked child resets it",
        inside_malloc: false,
    },
    LockInfo {
        class: LockClass::Modules,
        name: "modules::HISTORY",
        taken_by: "dumps (refreshing the module map), start-up, dlopen of a \
                   relative name, dlclose; the fork handlers",
        inside_malloc: false,
    },
    LockInfo {
        class: LockClass::Threads,
        name: "threads::REGISTRY",
        taken_by: "a thread's set-up and first sample and its allocations after its \
                   exit flush (inside malloc), its exit flush, dumps (a bounded \
                   copy); the fork handlers",
        inside_malloc: true,
    },
    LockInfo {
        class: LockClass::StackInsert,
        name: "stack_table::StackTable::insert_lock",
        taken_by: "the sample event, for a stack never seen before; the fork handlers",
        inside_malloc: true,
    },
    LockInfo {
        class: LockClass::TableSetup,
        name: "table_setup::SETUP",
        taken_by: "the first sample event of the process (making the tables, \
                   inside malloc); the fork handlers",
        inside_malloc: true,
    },
    LockInfo {
        class: LockClass::OwnHeap,
        name: "own_heap::HEAP",
        taken_by: "every allocation of the profiler's own Rust code (inside malloc: \
                   thread set-up and first sample); the fork handlers",
        inside_malloc: true,
    },
];

const _: () = {
    let mut rank = 0;
    while rank < LOCK_ORDER.len() {
        assert!(LOCK_ORDER[rank].class as usize == rank);
        rank += 1;
    }
};

/// Spins before sleeping in the kernel.
const SPINS: u32 = 64;

/// Mutual exclusion for the profiler's rare paths: a compare-and-swap when
/// free, a short spin, then a priority-inheriting wait in the kernel.
pub struct SpinLock<T> {
    /// 0 when free, else the owner's thread id (with the kernel's
    /// `FUTEX_WAITERS` bit while someone waits in the kernel).
    word: AtomicU32,
    class: LockClass,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialized by `word`.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: as above; the lock owns its value.
unsafe impl<T: Send> Send for SpinLock<T> {}

/// The calling thread's kernel id, as the PI futex wants it in the word
/// (cached in the thread's block: no `__tls_get_addr`, and a forked child
/// resets it in a page its fork handler writes anyway).
pub fn thread_id() -> u32 {
    let cached = &crate::tls::current().kernel_tid;
    let mut id = cached.load(Ordering::Relaxed);
    if id == 0 {
        id = gettid();
        cached.store(id, Ordering::Relaxed);
    }
    id
}

/// gettid by the `syscall` instruction: a forked child that takes its first
/// lock (at exit, say) need not fault in the page of libc's wrapper.
fn gettid() -> u32 {
    crate::arch::gettid()
}

/// In a forked child: the surviving thread has a new id (call first thing
/// in the child's fork handler, before any lock is reset).
pub fn forget_thread_id() {
    crate::tls::current().kernel_tid.store(0, Ordering::Relaxed);
}

fn futex(word: &AtomicU32, operation: libc::c_int) -> libc::c_long {
    // SAFETY: a PI futex operation on a valid, aligned u32 that lives as
    // long as the lock; no timeout, no second word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            operation | libc::FUTEX_PRIVATE_FLAG,
            0,
            core::ptr::null::<libc::timespec>(),
            core::ptr::null::<u32>(),
            0,
        )
    }
}

impl<T> SpinLock<T> {
    /// A new unlocked lock of `class`.
    pub const fn new(class: LockClass, value: T) -> Self {
        SpinLock {
            word: AtomicU32::new(0),
            class,
            value: UnsafeCell::new(value),
        }
    }

    fn try_take(&self, me: u32) -> bool {
        self.word
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Take the lock: spin briefly while another thread has it, then wait
    /// in the kernel with priority inheritance.
    pub fn lock(&self) -> SpinGuard<'_, T> {
        order::acquiring(self.class);
        let me = thread_id();
        if !self.try_take(me) {
            self.lock_contended(me);
        }
        SpinGuard { lock: self }
    }

    #[cold]
    fn lock_contended(&self, me: u32) {
        for _ in 0..SPINS {
            core::hint::spin_loop();
            if self.word.load(Ordering::Relaxed) == 0 && self.try_take(me) {
                return;
            }
        }
        loop {
            if futex(&self.word, libc::FUTEX_LOCK_PI) == 0 {
                return; // the kernel made us the owner
            }
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR | libc::EAGAIN) => continue,
                // No PI futexes here (or an owner the kernel cannot see):
                // spin and yield.
                _ => break,
            }
        }
        while !self.try_take(me) {
            // SAFETY: sched_yield has no preconditions.
            unsafe { crate::syscalls::sched_yield() };
        }
    }

    fn unlock(&self) {
        let me = thread_id();
        if self
            .word
            .compare_exchange(me, 0, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            // Waiters in the kernel: it hands the lock to the highest.
            futex(&self.word, libc::FUTEX_UNLOCK_PI);
        }
        order::released(self.class);
    }

    /// Take the lock and keep it past the guard's scope (for `fork`'s
    /// prepare handler). Pair with [`SpinLock::force_unlock`].
    pub fn lock_for_fork(&self) {
        core::mem::forget(self.lock());
    }

    /// Release a lock taken with [`SpinLock::lock_for_fork`] (in the fork
    /// parent), or reset it in a forked child, where its owner no longer
    /// exists (call [`forget_thread_id`] first there).
    ///
    /// # Safety
    /// No live [`SpinGuard`] of this lock may be used afterwards.
    pub unsafe fn force_unlock(&self) {
        let owner = self.word.load(Ordering::Relaxed) & libc::FUTEX_TID_MASK;
        if owner == thread_id() {
            self.unlock();
        } else {
            self.word.store(0, Ordering::Release);
            order::released(self.class);
        }
    }

    /// In a forked child: free the lock, whoever held it in the parent, and
    /// set its value to `value`, writing nothing when both already hold (a
    /// write would cost the child a copy-on-write fault).
    ///
    /// # Safety
    /// Only in a forked child's fork handler (the only thread), after
    /// [`forget_thread_id`]; no guard of the lock may be used afterwards.
    #[inline]
    pub unsafe fn reset_in_child(&self, value: T)
    where
        T: PartialEq,
    {
        // SAFETY: the only thread in the process reads the value; a writer
        // that held the lock in the parent did not survive the fork.
        let same = unsafe { *self.value.get() == value };
        if self.word.load(Ordering::Relaxed) == 0 && same {
            return;
        }
        // SAFETY: per the contract.
        unsafe { self.force_unlock() };
        *self.lock() = value;
    }
}

/// The extent of one malloc-family hook on the calling thread, for the
/// checks of debug builds (see [`enter_hook`]); nothing in release builds.
#[must_use]
pub struct HookScope(());

/// A malloc-family hook starts on this thread: call it first in every Rust
/// path the exported hooks reach (the routes, `contracts`, `cxx`), and keep
/// the scope until the hook returns. Debug builds (and the unit tests)
/// check that a hook entered from the program finds the thread holding
/// none of the profiler's locks and leaves it holding none (a hook entered
/// from inside the profiler, whose guard is set, may find the locks its
/// caller holds: the profiler's own calls into libc allocate too), and,
/// until it returns, that no lock whose row in [`LOCK_ORDER`] says
/// `inside_malloc: false` is taken. Release builds compile it to nothing.
#[inline(always)]
pub fn enter_hook() -> HookScope {
    order::hook_entered();
    HookScope(())
}

#[cfg(any(debug_assertions, test))]
impl Drop for HookScope {
    fn drop(&mut self) {
        order::hook_left();
    }
}

/// Access to the locked value; unlocks on drop.
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: we hold the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: we hold the lock exclusively.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.unlock();
    }
}

/// The checks of debug builds and unit tests: a per-thread mask of the
/// ranks held and a count of the malloc-family hooks the thread is in.
#[cfg(any(debug_assertions, test))]
mod order {
    use super::{LOCK_ORDER, LockClass};
    use core::cell::Cell;

    thread_local! {
        static HELD: Cell<u32> = const { Cell::new(0) };
        /// Hooks the thread is inside (nested when the profiler allocates
        /// through libc inside one).
        static HOOKS: Cell<u32> = const { Cell::new(0) };
    }

    pub fn acquiring(class: LockClass) {
        let info = &LOCK_ORDER[class as usize];
        if !info.inside_malloc && HOOKS.with(Cell::get) != 0 {
            panic!(
                "lock inside malloc: taking {} inside a malloc-family hook, which its row \
                 in spin_lock::LOCK_ORDER forbids",
                info.name
            );
        }
        let bit = 1u32 << class as u32;
        HELD.with(|held| {
            let at_or_above = held.get() & !(bit - 1);
            if at_or_above != 0 {
                let holding = LOCK_ORDER[at_or_above.trailing_zeros() as usize].name;
                panic!(
                    "lock order: taking {} while holding {holding} (see spin_lock::LOCK_ORDER)",
                    LOCK_ORDER[class as usize].name
                );
            }
            held.set(held.get() | bit);
        });
    }

    pub fn released(class: LockClass) {
        HELD.with(|held| held.set(held.get() & !(1u32 << class as u32)));
    }

    pub fn hook_entered() {
        assert_lockless("entry");
        HOOKS.with(|hooks| hooks.set(hooks.get() + 1));
    }

    pub fn hook_left() {
        HOOKS.with(|hooks| hooks.set(hooks.get() - 1));
        assert_lockless("exit");
    }

    /// No lock held, unless the hook runs inside the profiler (a nested
    /// call: jemalloc's reentrancy exception).
    fn assert_lockless(when: &str) {
        let held = HELD.with(Cell::get);
        if held != 0 && !crate::tls::current().guarded() {
            panic!(
                "lock held at hook {when}: {} (a hook entered from the program must find \
                 and leave the profiler's locks free)",
                LOCK_ORDER[held.trailing_zeros() as usize].name
            );
        }
    }
}

#[cfg(not(any(debug_assertions, test)))]
mod order {
    use super::LockClass;

    #[inline(always)]
    pub fn acquiring(_class: LockClass) {}

    #[inline(always)]
    pub fn released(_class: LockClass) {}

    #[inline(always)]
    pub fn hook_entered() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_in_rank_order_are_fine() {
        let outer = SpinLock::new(LockClass::Threads, 1);
        let inner = SpinLock::new(LockClass::OwnHeap, 2);
        let a = outer.lock();
        let b = inner.lock();
        assert_eq!(*a + *b, 3);
        drop(b);
        drop(a);
        let again = inner.lock();
        drop(again);
    }

    #[test]
    #[should_panic(expected = "lock order: taking threads::REGISTRY while holding own_heap::HEAP")]
    fn a_lock_of_lower_rank_under_a_higher_one_is_refused() {
        let outer = SpinLock::new(LockClass::OwnHeap, ());
        let inner = SpinLock::new(LockClass::Threads, ());
        let _a = outer.lock();
        let _b = inner.lock();
    }

    #[test]
    #[should_panic(expected = "lock held at hook entry: threads::REGISTRY")]
    fn a_lock_held_when_the_program_enters_a_hook_is_refused() {
        let lock = SpinLock::new(LockClass::Threads, ());
        let _held = lock.lock();
        let _hook = enter_hook();
    }

    #[test]
    #[should_panic(expected = "lock held at hook exit: stack_table::StackTable::insert_lock")]
    fn a_lock_still_held_when_a_hook_returns_is_refused() {
        let lock = SpinLock::new(LockClass::StackInsert, ());
        let hook = enter_hook();
        core::mem::forget(lock.lock());
        drop(hook);
    }

    #[test]
    #[should_panic(
        expected = "lock inside malloc: taking modules::HISTORY inside a malloc-family hook"
    )]
    fn a_lock_not_for_malloc_taken_inside_a_hook_is_refused() {
        let lock = SpinLock::new(LockClass::Modules, ());
        let _hook = enter_hook();
        let _history = lock.lock();
    }

    #[test]
    fn inside_a_hook_the_locks_for_malloc_may_be_taken() {
        let _hook = enter_hook();
        for info in LOCK_ORDER.iter().filter(|info| info.inside_malloc) {
            drop(SpinLock::new(info.class, ()).lock());
        }
        let nested = enter_hook();
        drop(SpinLock::new(LockClass::OwnHeap, ()).lock());
        drop(nested);
    }

    #[test]
    fn a_hook_nested_in_the_profiler_may_find_its_locks_held() {
        // The dumper holds the dump lock and calls into libc, which
        // allocates: the nested hook runs under the thread's guard.
        let _guard = crate::tls::Guard::enter();
        let dump = SpinLock::new(LockClass::Dump, ());
        let _held = dump.lock();
        drop(enter_hook());
        // Outside any hook, every lock may be taken again.
        drop(SpinLock::new(LockClass::Modules, ()).lock());
    }

    #[test]
    fn contended_waiters_get_the_lock_in_turn() {
        static COUNTER: SpinLock<u64> = SpinLock::new(LockClass::StackInsert, 0);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    for _ in 0..20_000 {
                        let mut value = COUNTER.lock();
                        *value += 1;
                        if (*value).is_multiple_of(1000) {
                            std::thread::yield_now(); // hold it a while: waiters sleep
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(*COUNTER.lock(), 80_000);
    }

    #[test]
    fn fork_style_release_frees_the_lock() {
        let lock = SpinLock::new(LockClass::Dump, ());
        lock.lock_for_fork();
        // SAFETY: taken just above by lock_for_fork, no guard alive.
        unsafe { lock.force_unlock() };
        drop(lock.lock());
    }
}
