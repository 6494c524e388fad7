/* versions.c: the weight versions one stage holds (pl_sched.h, sched_versions): a forward uses
 * the newest, a STEP writes a new one while the newest is in use, the last backward of an older
 * one frees it. */
#include "sched_int.h"

#include <stdlib.h>
#include <string.h>

int sched_versions_init(sched_versions *v, int64_t mbs) {
    memset(v, 0, sizeof *v);
    if (mbs < 0 || mbs >= INT32_MAX) return PL_ENOMEM;
    v->ver_of = pl_calloc((size_t)mbs + 1, sizeof *v->ver_of);
    v->refs = pl_calloc((size_t)mbs + 1, sizeof *v->refs);
    if (!v->ver_of || !v->refs) {
        sched_versions_free(v);
        return PL_ENOMEM;
    }
    for (int64_t j = 0; j < mbs; j++) v->ver_of[j] = -1;
    v->mbs = mbs;
    v->held = 1;
    return PL_OK;
}

void sched_versions_free(sched_versions *v) {
    free(v->ver_of);
    free(v->refs);
    memset(v, 0, sizeof *v);
}

void sched_versions_forward(sched_versions *v, int64_t mb) {
    if (mb < 0 || mb >= v->mbs || v->ver_of[mb] >= 0) return;
    v->ver_of[mb] = v->newest;
    v->refs[v->newest]++;
}

int sched_versions_backward(sched_versions *v, int64_t mb) {
    if (mb < 0 || mb >= v->mbs || v->ver_of[mb] < 0) return 0;
    int32_t x = v->ver_of[mb];
    v->ver_of[mb] = -1;
    v->acc++;
    if (--v->refs[x] > 0 || x == v->newest) return 0;
    v->held--;
    return -1;
}

int sched_versions_step(sched_versions *v) {
    if (v->acc == 0) return 0;
    v->acc = 0;
    /* at most one new version per microbatch that used the newest: newest <= mbs */
    if (v->refs[v->newest] == 0 || v->newest >= v->mbs) return 0;
    v->newest++;
    v->held++;
    return 1;
}
