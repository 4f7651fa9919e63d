/*
 * POSIX shared memory segments and futexes for the on-host data path.
 */
#ifndef AGG_SHM_H
#define AGG_SHM_H

#include <stddef.h>
#include <stdint.h>
#include "agg/status.h"

/* Creates (exclusively) and maps a zero-filled segment of `size` bytes. */
agg_status_t agg_shm_create(const char *name, size_t size, void **addr);

/* Maps an existing segment; *size gets its length. */
agg_status_t agg_shm_attach(const char *name, void **addr, size_t *size);

void agg_shm_detach(void *addr, size_t size);
void agg_shm_unlink(const char *name);

/*
 * Unlinks the segments a switchsim that no longer runs left behind (named
 * "/agg-PID-...", PID a process that does not exist: killed before it could
 * unlink them); returns how many.
 */
int agg_shm_sweep(void);

/*
 * Sleeps while *addr == val, at most timeout_ms (a process-shared futex).
 * Returns AGG_OK when woken or the value changed, AGG_ERR_TIMEOUT otherwise.
 */
agg_status_t agg_futex_wait(uint32_t *addr, uint32_t val, int timeout_ms);
void agg_futex_wake(uint32_t *addr, int count);

static inline void agg_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
