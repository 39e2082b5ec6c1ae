# cython: language_level=3
"""What ``_topk_topp`` shares at C level: one row's top-k/top-p mask on a float32 working row,
for kernels that mask a row they have already read (``_spec_step`` masks each sampled row's
temperature-scaled copy as its walk reaches it). The kept-set rules are ``_topk_topp.pyx``'s,
written once there.
"""
from libc.stdint cimport int64_t

cdef void* row_scratch(Py_ssize_t V) noexcept nogil
cdef void free_row_scratch(void* s) noexcept nogil
cdef void mask_row_f32(float* row, Py_ssize_t n, int64_t k, double p, void* s) noexcept nogil
cdef void widen_row(const char* row, int code, Py_ssize_t n, float* out) noexcept nogil
