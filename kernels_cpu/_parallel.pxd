# cython: language_level=3
"""OpenMP policy shared by the kernel modules (see ``_parallel.pyx``)."""
cdef int threads_for(Py_ssize_t work) noexcept
