"""Our Triton kernels, one per contract in ``kernels.md``, grouped as vLLM groups them.

They import without Triton (as plain functions) so their qualified names always resolve; see
:mod:`fastdispatch.ops._triton` for when they actually run.
"""
