"""Our Triton kernels, one per contract (``docs/kernel_contracts.md``), grouped as vLLM does.

They import without Triton (as plain functions) so their qualified names always resolve; see
:mod:`fastdispatch.ops._triton` for when they actually run.

``QUALNAMES`` maps each contract name to the qualified name the kernel is registered under;
``kernel(name)`` returns our Triton kernel itself even after ``register_kernels`` has replaced
the module attribute with an override (this table is captured at import, before any
registration, and the rebinding pass rebinds module attributes and launch owners, not dict
values).
"""

from . import sampling, spec_decode, topk_topp, workers

_MODULES = (sampling, spec_decode, workers, topk_topp)

#: contract name -> qualified name of our kernel.
QUALNAMES = {}
_ORIGINALS = {}
for _module in _MODULES:
    for _name, _value in vars(_module).items():
        if _name.endswith("_kernel") and not _name.startswith("_"):
            QUALNAMES[_name] = f"{_module.__name__}.{_name}"
            _ORIGINALS[_name] = _value
del _module, _name, _value


def kernel(name):
    """Our kernel for contract ``name`` (e.g. ``"expand_kernel"``), never an override."""
    return _ORIGINALS[name]
