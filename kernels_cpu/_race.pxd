# cython: language_level=3
"""What ``_race`` shares at C level: the exponential race over rows, its jobs and its random
stream, for the modules that drive it (``_fused``: a launch's recovered tokens and whole steps;
``_spec_step``: the whole speculative step read from the logits in place).

The race and its stream are defined once, in ``_race.pyx`` (its docstring says why the block
race is exact and which Philox counters each draw uses); a module that cimports these gets the
same tokens for the same seeds.
"""
from libc.stdint cimport int64_t, uint32_t, uint64_t

from kernels_cpu._philox cimport philox4x32_10, u53_open

cdef enum:
    BLOCK = 256           # ids per race block: part of the stream's definition, never change it
    RUN = 64              # blocks summed per call of the block-sum loop
    PURPOSE_BLOCKS = 0
    PURPOSE_STEP = 1
    KIND_RECOVER = 0
    KIND_ARGMAX = 1


cdef struct Job:
    const float* t        # target (or greedy score) row
    const float* q        # draft row, NULL without draft probs
    int64_t skip          # id masked to 0 (no draft probs), else -1
    uint32_t k0, k1, stream, pos
    int kind
    bint logits           # t holds logits: mass exp(t - m) [* invz - q] instead of t [- q]
    float m, invz         # row max and 1 / sum(exp(t - m)) when logits
    int64_t token         # result


cdef struct Part:
    double score          # best block score / chunk maximum (NaN: chunk holds a NaN)
    int64_t idx           # best block / argmax index, -1 when nothing qualified


cdef inline void _set_key(Job* job, const int64_t* seeds, Py_ssize_t r,
                          uint32_t pos) noexcept nogil:
    cdef uint64_t key = <uint64_t>seeds[2 * r]
    job.k0 = <uint32_t>key
    job.k1 = <uint32_t>(key >> 32)
    job.stream = <uint32_t>seeds[2 * r + 1]
    job.pos = pos
    job.logits = False
    job.m = 0
    job.invz = 1


cdef inline void _recover_job(Job* job, const float* t, const float* q,
                              int64_t skip) noexcept nogil:
    """A recovered-token job: the race over ``max(t - q, 0)``, or over ``t`` without id
    ``skip`` when ``q`` is NULL (no draft probs)."""
    job.kind = KIND_RECOVER
    job.t = t
    job.q = q
    job.skip = skip


cdef inline double _accept_uniform(const int64_t* seeds, Py_ssize_t r,
                                   uint32_t pos) noexcept nogil:
    cdef uint32_t w[4]
    cdef uint64_t key = <uint64_t>seeds[2 * r]
    philox4x32_10(0, pos, <uint32_t>seeds[2 * r + 1], PURPOSE_STEP,
                  <uint32_t>key, <uint32_t>(key >> 32), w)
    return u53_open(w[0], w[1])


cdef inline bint _accepts(double u, double dp, double tp) noexcept nogil:
    """vLLM's accept test, in float64: ``draft_prob > 0 and target_prob / draft_prob >= u``."""
    return dp > 0 and tp / dp >= u


# the race over rows, and what it is built from
cdef void _race_chunk(Job* job, Py_ssize_t V, Py_ssize_t b0, Py_ssize_t b1,
                      Part* out) noexcept nogil
cdef int64_t _pick_in_block(Job* job, Py_ssize_t V, int64_t b) noexcept nogil
cdef int _run_jobs(Job* jobs, Py_ssize_t njobs, Py_ssize_t V, int nt,
                   Py_ssize_t cb) noexcept nogil
cdef void _row_norm(const float* l, Py_ssize_t V, float* m_out, float* invz_out) noexcept nogil
cdef int64_t race_logits(const int64_t* seeds, Py_ssize_t r, uint32_t pos, const float* row,
                         const float* q, int64_t skip, float m, float invz,
                         Py_ssize_t V) noexcept nogil
cdef Py_ssize_t argmax_row(const float* t, Py_ssize_t n) noexcept nogil
cdef float expf32(float x) noexcept nogil
