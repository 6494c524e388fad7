/* platform.h: system services of the executor (cores, pinning, BLAS threads), plain C types only. */
#ifndef EXEC_PLATFORM_H
#define EXEC_PLATFORM_H

/* Lists the cores this process may run on into cpus (at most max); returns how many. */
int exec_platform_cores(int *cpus, int max);
/* Lets the calling thread (and the threads it starts) run on every core of the host, undoing a
 * launcher's binding; returns 0, or -1 when the system refuses. */
int exec_platform_unbind_self(void);
/* Pins the calling thread to core cpu; returns 0, or -1 when the system refuses. */
int exec_platform_pin_self(int cpu);
/* Makes the BLAS use one thread per caller; returns its name ("openblas" or "gslcblas"). */
const char *exec_platform_blas_init(void);
/* Returns the size of the last-level cache in bytes as the system reports it (the level-3
 * cache, else level 2), or 0 when it reports none. */
long long exec_platform_llc_bytes(void);

#endif
