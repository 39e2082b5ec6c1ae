"""Model Runner V2's outputs kernels: their contracts (see ``kernels_cpu._contracts_mrv2``)."""

from .contracts import Contract  # noqa: F401  -- the table's row type

CONTRACTS: tuple[Contract, ...] = ()
