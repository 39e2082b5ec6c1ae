# cython: language_level=3
"""What ``_fused`` shares at C level: the validators of a whole speculative step's arguments,
for the entry points that check a step the same way (``_spec_step``: the whole speculative
sampling step read from the logits in place). The race they sample with is ``_race.pxd``'s.
"""
from libc.stdint cimport int64_t

from kernels_cpu._buffers cimport IBuf

# the step's validators
cdef Py_ssize_t _check_offsets(IBuf cu, Py_ssize_t B, Py_ssize_t T, Py_ssize_t K,
                               str name, str t_name=*) except -1
cdef Py_ssize_t _total(IBuf cu, Py_ssize_t B) noexcept


cdef struct StepRows:
    # What every speculative step entry reads first: the output rows, offsets and draft ids
    IBuf out
    IBuf cu
    IBuf draft
    Py_ssize_t B          # requests (elements of the offsets)
    Py_ssize_t T          # draft tokens, cu[B - 1]
    Py_ssize_t width      # slots per output row, max_spec_len + 1
    Py_ssize_t most       # the longest request's drafts


cdef int check_step_rows(StepRows* s, object output_token_ids, object cu_num_draft_tokens,
                         object draft_token_ids, object max_spec_len) except -1
cdef int no_output_overlap(const StepRows* s, str name, const char* p, Py_ssize_t nbytes) except -1
cdef int _check_ids(IBuf ids, Py_ssize_t n, Py_ssize_t V, str name) except -1
cdef const float* _probs(object t, str name, Py_ssize_t T, Py_ssize_t V) except NULL
cdef const int64_t* _seeds(object t, str name, Py_ssize_t B) except NULL
