"""Types of ``kernels_cpu._row_argmax``: torch's ``argmax(dim=-1)`` over rows."""

from torch import Tensor

def argmax_rows(logits: Tensor, out: Tensor) -> Tensor: ...
