"""The contract table (``kernels_cpu.contracts``) against everything that restates it.

The table is the one written form of each kernel's arguments and their acceptance rules; the
generated document, the ``kernels_cpu`` signatures, our Triton kernels and the vLLM name map
must all say the same thing, so a change to one without the others fails here.
"""

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import kernels_cpu
from fastdispatch._bindcheck import kernel_arg_names
from fastdispatch.ops import triton_kernels
from kernels_cpu import _overrides, contracts

DOC = Path(__file__).resolve().parents[1] / "docs" / "kernel_contracts.md"
NAMES = [c.name for c in contracts.CONTRACTS]
#: The kernels with a Triton twin of ours (the V1 runner's); Model Runner V2's are checked
#: against vLLM's own kernels instead (tests/test_mrv2_contracts.py).
OURS = [c.name for c in contracts.CONTRACTS if c.runner == "v1"]


def test_the_document_is_generated_from_the_table():
    assert DOC.read_text() == contracts.markdown(), (
        "docs/kernel_contracts.md is stale: regenerate it with "
        "`python -m kernels_cpu.contracts > docs/kernel_contracts.md`"
    )


@pytest.mark.parametrize("name", NAMES)
def test_signature_matches_the_contract(name):
    c = contracts.contract(name)
    impl = getattr(getattr(kernels_cpu, c.module), name)
    assert getattr(kernels_cpu, name) is impl
    params = inspect.signature(impl).parameters.values()
    positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    keyword_only = [p.name for p in params if p.kind is p.KEYWORD_ONLY]
    assert [a.name for a in c.args] == positional
    # a kernel that needs its launch grid takes it, keyword-only, and nothing else that way
    assert keyword_only == (["grid"] if c.takes_grid else [])


def _our_triton_kernel(name):
    """Our Triton kernel of that name, from whichever module of the package holds it."""
    if name in triton_kernels.QUALNAMES:
        return triton_kernels.kernel(name)
    for info in pkgutil.iter_modules(triton_kernels.__path__):
        module = importlib.import_module(f"{triton_kernels.__name__}.{info.name}")
        if name in vars(module):
            return vars(module)[name]
    raise AssertionError(f"no Triton kernel {name} in {triton_kernels.__name__}")


@pytest.mark.parametrize("name", OURS)
def test_our_triton_kernel_takes_the_contracts_arguments(name):
    assert list(kernel_arg_names(_our_triton_kernel(name))) == [
        a.name for a in contracts.contract(name).args
    ]


def test_every_kernel_and_every_vllm_implementation_has_a_contract():
    kernels = {n for n in dir(kernels_cpu) if n.endswith("_kernel") and not n.startswith("_")}
    assert kernels <= set(NAMES), kernels - set(NAMES)
    impls = {i for entry in _overrides.VLLM_KERNELS.values() for i in entry.impls}
    assert impls <= set(NAMES), impls - set(NAMES)


def test_the_kernel_table_is_read_from_the_contracts():
    """``VLLM_KERNELS`` (and through it ``kernels_cpu.__all__``, the case builders
    ``fdkit.cases.KERNELS``, the parity tests, the vLLM name list) is derived from the
    contracts' ``vllm``/``serves`` fields: a kernel is added by its contract entry. Model Runner
    V2's kernels (``runner="v2"``) make ``MRV2_KERNELS`` the same way."""
    tables = {"v1": _overrides.VLLM_KERNELS, "v2": _overrides.MRV2_KERNELS}
    for runner, table in tables.items():
        newest = [c.name for c in contracts.CONTRACTS if c.vllm and c.runner == runner]
        assert list(table) == newest, runner
    newest = [c for c in contracts.CONTRACTS if c.vllm]
    for c in newest:
        entry = tables[c.runner][c.name]
        assert entry.names == c.vllm
        assert entry.impls == (c.name,) + tuple(
            o.name for o in contracts.CONTRACTS if o.serves == c.name
        )
        assert all(n.startswith("vllm.") and n.count(".") >= 2 for n in c.vllm), c.vllm
    assert all(c.vllm or c.serves for c in contracts.CONTRACTS)
    assert not any(c.vllm and c.serves for c in contracts.CONTRACTS)
    impls = [i for table in tables.values() for entry in table.values() for i in entry.impls]
    assert [n for n in kernels_cpu.__all__ if n.endswith("_kernel")] == impls
    assert all(callable(getattr(kernels_cpu, n)) for n in impls)
    assert set(impls) == set(NAMES)


def test_every_kernel_module_is_typed_in_the_package():
    """``kernels_cpu/__init__.py`` exports the kernels at run time from the contracts, and for
    type checkers star-imports each kernel module's stub: a contract naming a module the
    package does not import for its types fails here."""
    source = (Path(kernels_cpu.__file__)).read_text()
    for module in {c.module for c in contracts.CONTRACTS}:
        assert f"from .{module} import *" in source, module
        assert (Path(kernels_cpu.__file__).parent / f"{module}.pyi").exists(), module


def test_rules_and_roles_are_the_defined_ones():
    for c in contracts.CONTRACTS:
        for a in c.args:
            assert a.kind in contracts.RULES, (c.name, a.name, a.kind)
            assert a.role in ("in", "out", "inout", "scalar"), (c.name, a.name)
            assert (a.role == "scalar") == (not a.dtypes), (c.name, a.name)
    with pytest.raises(KeyError, match="no_such_kernel"):
        contracts.contract("no_such_kernel")
