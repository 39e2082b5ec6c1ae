"""Plain-torch reference implementations of the kernel contracts (slow, obviously correct).

One submodule per area -- ``sampling``, ``spec_decode``, ``workers`` -- each with the same
function names, signatures and in-place outputs as the compiled kernels in ``kernels_cpu``. The
tests compare the compiled kernels with them and the bench scripts time them side by side. They
assume valid inputs: validation is the compiled kernels' job.
"""
