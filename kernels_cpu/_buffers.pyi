"""Types of ``kernels_cpu._buffers``.

Its API is C-level (``cimport`` through ``_buffers.pxd``: dtype codes, ``IBuf``,
``check_tensor``, ``check_index``); Python sees only the tensor reader's test hooks.
"""

import torch

def _check_view_reader() -> bool: ...
def _view_reader_enabled() -> bool: ...
def _set_view_reader(enabled: bool) -> bool: ...
def _inspect(
    t: torch.Tensor, name: str = "t", mask: int = ..., ndim: int = -1
) -> tuple[int, tuple[int, ...], int]: ...
