/* One row of a run: consecutive rows of one request masked by top-k/top-p in one parallel
   region (_topk_topp_rows.pyx: run_rows_f32_team), as the run's caller describes each row to
   every thread of the team -- the same answer on each. Shared by the module that masks the
   run and the one that describes its rows (_mrv2_spec.pyx's one pass). */
#ifndef KERNELS_CPU_RUN_ROWS_H
#define KERNELS_CPU_RUN_ROWS_H

#include <stdint.h>

#define FD_RUN_HOLD 64      /* bytes a row's loader context may take (fd_run_hold) */

typedef struct {
    float* row;         /* where the row is written: n values */
    int64_t k;          /* its top-k (>= n: none) */
    double p;           /* its top-p (>= 1: none) */
    void* ctx;          /* its loader's and peeker's context (in hold: the thread's own) */
    int peek;           /* whether it may be peeked: the row before it kept its top token */
    int64_t want;       /* the token it must keep alone for the run to go on; -1: the last */
    union { void* p; double d; int64_t i; char b[FD_RUN_HOLD]; } hold;
} fd_run_row;

/* the storage a describer writes its loader context into (FD_RUN_HOLD bytes, aligned) */
static inline void* fd_run_hold(fd_run_row* r) { return (void*)&r->hold; }

#endif
