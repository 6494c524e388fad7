/* platform.c: the executor's contact with the system (cores, thread pinning, the BLAS's own
 * threads), compiled apart from the other modules, so that only this file sees OpenBLAS's header. */
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "platform.h"

#ifdef PIPELAB_OPENBLAS
#include <cblas.h>
#endif

int exec_platform_cores(int *cpus, int max) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < max; c++)
        if (CPU_ISSET(c, &set)) cpus[n++] = c;
    return n;
}

int exec_platform_unbind_self(void) {
    long n = sysconf(_SC_NPROCESSORS_CONF);
    cpu_set_t set;
    CPU_ZERO(&set);
    for (long c = 0; c < n && c < CPU_SETSIZE; c++) CPU_SET((int)c, &set);
    /* the kernel keeps the cores a cpuset allows of these */
    return n > 0 && sched_setaffinity(0, sizeof set, &set) == 0 ? 0 : -1;
}

int exec_platform_pin_self(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0 ? 0 : -1;
}

const char *exec_platform_blas_init(void) {
#ifdef PIPELAB_OPENBLAS
    openblas_set_num_threads(1);
    return "openblas";
#else
    return "gslcblas";
#endif
}

long long exec_platform_llc_bytes(void) {
    long n = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    n = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
    if (n <= 0) n = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return n > 0 ? (long long)n : 0;
}
