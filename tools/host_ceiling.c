/* What a host's cores give a perfectly parallel job: the ceiling any kernel's scaling meets.

   cc -O2 -march=native -fopenmp -o host_ceiling tools/host_ceiling.c && ./host_ceiling [max_threads]

   Prints, for 1..max_threads threads (default: the CPU count):
   - compute: each thread evaluates a polynomial over its own 16 KB array (in L1, nothing
     shared, no memory traffic) for a fixed amount of work; the speed-up is t threads' total
     work over the time one thread takes for its share -- what exp-heavy passes (a top-p bucket
     pass, a softmax's statistics) can reach at best. On a host whose vCPUs share physical
     cores (SMT) or whose all-core clock is below one core's, it stays well below t.
   - stream: a sum over a 1 GiB array split across the threads (the bandwidth a pass that
     only reads can reach).
   - region: the cost of one empty parallel region, back to back (the fork/join a kernel pays
     each time it splits a row across the team).
   - barrier: the cost of one barrier inside a region (what a kernel pays between two passes
     it runs in one region instead of a region each).
   - pairs: one thread pinned to CPU 0 and one to CPU j, each doing the compute work: the pair's
     speed-up over one thread; about 1.0-1.3x where CPU j is CPU 0's SMT sibling, 2x where
     it is a core of its own.
   Each figure is the best of 5 tries (a shared host's noise only ever slows a try down). */
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 4096
#define REPS 6000

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* 8 FMAs per element per repetition, vectorised; the result is kept so it is computed */
static float work(float* a, int reps) {
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < N; i++) {
            float x = a[i];
            a[i] = ((((((((x * 0.99f + 0.01f) * x + 0.02f) * x + 0.03f) * x + 0.04f) * x + 0.05f)
                        * x + 0.06f) * x + 0.07f) * x + 0.08f) * 0.125f;
        }
    float s = 0.0f;
    for (int i = 0; i < N; i++) s += a[i];
    return s;
}

static volatile float sink;

static double compute_time(int t) {
    double best = 1e30;
    for (int k = 0; k < 5; k++) {
        double t0 = now();
#pragma omp parallel num_threads(t)
        {
            float a[N];
            for (int i = 0; i < N; i++) a[i] = (float)i / N;
            sink = work(a, REPS);
        }
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    return best;
}

static cpu_set_t all_cpus; /* the process's own mask, restored after each pinned pair */

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
}

static double pair_time(int j) {
    double best = 1e30;
    for (int k = 0; k < 5; k++) {
        double t0 = now();
#pragma omp parallel num_threads(2)
        {
            pin(omp_get_thread_num() == 0 ? 0 : j);
            float a[N];
            for (int i = 0; i < N; i++) a[i] = (float)i / N;
            sink = work(a, REPS);
        }
        double dt = now() - t0;
        best = dt < best ? dt : best;
#pragma omp parallel num_threads(2)
        sched_setaffinity(0, sizeof all_cpus, &all_cpus);
    }
    return best;
}

int main(int argc, char** argv) {
    int nprocs = omp_get_num_procs();
    int maxt = argc > 1 ? atoi(argv[1]) : nprocs;
    sched_getaffinity(0, sizeof all_cpus, &all_cpus);
    size_t n = (size_t)1 << 28; /* 1 GiB of floats */
    float* big = malloc(n * sizeof(float));
    if (!big) return 1;
#pragma omp parallel for num_threads(maxt) schedule(static)
    for (size_t i = 0; i < n; i++) big[i] = 1.0f;
    double c1 = compute_time(1);
    printf("| threads | compute speed-up | stream GB/s | stream speed-up | empty region us | "
           "barrier us |\n");
    printf("|---|---|---|---|---|---|\n");
    double s1 = 0.0;
    for (int t = 1; t <= maxt; t++) {
        if (t > 2 && t % 2 && t != maxt) continue;
        double ct = compute_time(t);
        double sbest = 1e30;
        for (int k = 0; k < 5; k++) {
            double t0 = now();
            unsigned acc = 0; /* an xor of the words: vectorised without reassociating sums */
#pragma omp parallel for num_threads(t) schedule(static) reduction(^ : acc)
            for (size_t i = 0; i < n; i++) acc ^= ((const unsigned*)big)[i];
            double dt = now() - t0;
            sink = (float)acc;
            sbest = dt < sbest ? dt : sbest;
        }
        double gbs = n * sizeof(float) / sbest / 1e9;
        if (t == 1) s1 = gbs;
        double rbest = 1e30;
        for (int k = 0; k < 5; k++) {
            double t0 = now();
            for (int i = 0; i < 2000; i++) {
#pragma omp parallel num_threads(t)
                { sink = 0.0f; }
            }
            double dt = (now() - t0) / 2000;
            rbest = dt < rbest ? dt : rbest;
        }
        double bbest = 1e30;
        for (int k = 0; k < 5; k++) {
            double t0 = now();
#pragma omp parallel num_threads(t)
            {
                for (int i = 0; i < 2000; i++) {
#pragma omp barrier
                }
            }
            double dt = (now() - t0) / 2000;
            bbest = dt < bbest ? dt : bbest;
        }
        printf("| %d | %.2fx | %.1f | %.2fx | %.2f | %.2f |\n", t, t * c1 / ct, gbs, gbs / s1,
               rbest * 1e6, bbest * 1e6);
        fflush(stdout);
    }
    printf("\n| CPU 0 with CPU j | pair speed-up over one thread |\n|---|---|\n");
    for (int j = 1; j < nprocs; j++)
        printf("| %d | %.2fx |\n", j, 2 * c1 / pair_time(j));
    free(big);
    return 0;
}
