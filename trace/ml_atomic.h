/* ml_atomic.h - named memory-order atomics.
 *
 * Low-level; no heap, no stdio. Every atomic access in memlens goes through one
 * of these wrappers so that the ordering is visible at the call site
 * (STYLE rule 17): write ml_atomic_load_acquire(p), never a bare
 * atomic_load_explicit with an order passed as a parameter.
 */
#ifndef ML_ATOMIC_H
#define ML_ATOMIC_H

#include <stdatomic.h>
#include <stdint.h>

#define ml_atomic_load_relaxed(p) atomic_load_explicit((p), memory_order_relaxed)
#define ml_atomic_load_acquire(p) atomic_load_explicit((p), memory_order_acquire)
#define ml_atomic_store_relaxed(p, x) atomic_store_explicit((p), (x), memory_order_relaxed)
#define ml_atomic_store_release(p, x) atomic_store_explicit((p), (x), memory_order_release)
#define ml_atomic_add_relaxed(p, x) atomic_fetch_add_explicit((p), (x), memory_order_relaxed)
#define ml_atomic_add_acq_rel(p, x) atomic_fetch_add_explicit((p), (x), memory_order_acq_rel)
#define ml_atomic_or_relaxed(p, x) atomic_fetch_or_explicit((p), (x), memory_order_relaxed)
#define ml_atomic_and_relaxed(p, x) atomic_fetch_and_explicit((p), (x), memory_order_relaxed)
#define ml_atomic_exchange_acq_rel(p, x) atomic_exchange_explicit((p), (x), memory_order_acq_rel)
#define ml_atomic_cas_strong_acq_rel(p, expected, desired)                                         \
    atomic_compare_exchange_strong_explicit((p), (expected), (desired), memory_order_acq_rel,      \
                                            memory_order_acquire)

#define ML_CACHE_LINE 64

#if defined(__x86_64__) || defined(__i386__)
#define ml_cpu_relax() __builtin_ia32_pause()
#else
#define ml_cpu_relax() ((void)0)
#endif

#define ml_likely(x) __builtin_expect(!!(x), 1)
#define ml_unlikely(x) __builtin_expect(!!(x), 0)

#endif
