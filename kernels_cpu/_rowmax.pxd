# cython: language_level=3
"""The row reductions of ``_rowmax.h`` (one vectorised pass each, cloned per x86-64 level): a
run's largest value with NaN set aside and whether a NaN occurs (and the largest of the
others), the first lane equal to a value, the first NaN. The argmax kernels and top-k/top-p's
row loop cimport them from here."""

cdef extern from "_rowmax.h":
    float fd_max_nan(const float* x, Py_ssize_t n, int* has_nan) noexcept nogil
    float fd_top2_nan(const float* x, Py_ssize_t n, int* has_nan, float* second) noexcept nogil
    Py_ssize_t fd_first_equal(const float* x, Py_ssize_t n, float v) noexcept nogil
    Py_ssize_t fd_first_nan(const float* x, Py_ssize_t n) noexcept nogil
