"""``install(fused_noise=True)``'s replacements take the signature of the vLLM function they
replace, read at install -- against a fake ``vllm.v1.sample.rejection_sampler`` shaped like
vLLM 0.33.0's (whose ``RejectionSampler.forward`` always passes ``fly_window_size``,
``fly_entropy_threshold`` and ``fly_entropy_top_k``), and like 0.32.0's.

No vLLM here: the fake module stands in ``sys.modules`` for the test's duration, and the
adapters are registered over it with fastdispatch's registry (both backends), as ``install``
does. What must hold: the adapter's signature is the target's exactly; a call as vLLM makes it
reaches the fused implementation with the same values and gives its result; a FLy request is
refused as vLLM refuses FLy on CPU (``NotImplementedError``, its words, before anything runs),
never a ``TypeError``; a parameter we do not know leaves that function to vLLM, with a warning.
"""

import inspect
import logging
import sys
import types

import pytest
import torch

import fastdispatch.vllm as fv
from fastdispatch.ops import fused
from fastdispatch.vllm import _fused_noise

MODULE = "vllm.v1.sample.rejection_sampler"


#: vLLM 0.32.0's ``rejection_sample`` parameters; 0.33.0 appends FLy's three.
_PARAMS_032 = (
    "draft_token_ids",
    "num_draft_tokens",
    "max_spec_len",
    "cu_num_draft_tokens",
    "draft_probs",
    "target_logits",
    "bonus_token_ids",
    "sampling_metadata",
    "synthetic_mode=False",
    "synthetic_conditional_rates=None",
    "use_fp64_gumbel=False",
)
_PARAMS_033 = _PARAMS_032 + (
    "fly_window_size=None",
    "fly_entropy_threshold=None",
    "fly_entropy_top_k=3",
)
_STOCK_RAN = "raise AssertionError('stock rejection_sample ran: the replacement did not stand')"


def _function(name, params, body, **names):
    """A function ``name(params)`` running ``body`` (``names`` its globals): the signatures under
    test are vLLM's, written once above."""
    exec(f"def {name}({', '.join(params)}):\n    {body}\n", names)
    return names[name]


_rejection_sample_033 = _function("rejection_sample", _PARAMS_033, _STOCK_RAN)
_rejection_sample_032 = _function("rejection_sample", _PARAMS_032, _STOCK_RAN)
_sample_recovered_tokens = _function(
    "sample_recovered_tokens",
    (
        "max_spec_len",
        "num_draft_tokens",
        "cu_num_draft_tokens",
        "draft_token_ids",
        "draft_probs",
        "target_probs",
        "sampling_metadata",
        "device",
        "use_fp64_gumbel=False",
    ),
    "raise AssertionError('stock sample_recovered_tokens ran')",
)


def _forward_033(module, c, fly_window_size=None):
    """What 0.33's ``RejectionSampler.forward`` does: a module-global lookup, FLy always passed."""
    return module.rejection_sample(
        c["draft"],
        c["num_draft"],
        c["K"],
        c["cu"],
        None,
        c["logits"],
        c["bonus"],
        c["md"],
        synthetic_mode=False,
        synthetic_conditional_rates=None,
        use_fp64_gumbel=False,
        fly_window_size=fly_window_size,
        fly_entropy_threshold=None if fly_window_size is None else 0.5,
        fly_entropy_top_k=3,
    )


@pytest.fixture
def fake_vllm(monkeypatch):
    """A ``vllm.v1.sample.rejection_sampler`` module (and its parents) in ``sys.modules``."""

    def make(rejection_sample):
        parts = MODULE.split(".")
        for i in range(1, len(parts)):
            name = ".".join(parts[:i])
            if name not in sys.modules:
                monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
        module = types.ModuleType(MODULE)
        for fn in (rejection_sample, _sample_recovered_tokens):
            fn = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__)
            fn.__module__ = MODULE
            setattr(module, fn.__name__, fn)
        monkeypatch.setitem(sys.modules, MODULE, module)
        return module

    return make


def _greedy_case():
    B, K, V = 3, 2, 11
    gen = torch.Generator().manual_seed(1)
    num_draft = [2, 0, 1]
    T = sum(num_draft)
    logits = torch.randn(T, V, generator=gen)
    draft = logits.argmax(-1).to(torch.int32)
    draft[1] = (draft[1] + 1) % V  # one rejection
    md = types.SimpleNamespace(
        all_greedy=True, all_random=False, temperature=torch.zeros(B), generators={}
    )
    return dict(
        B=B,
        K=K,
        num_draft=num_draft,
        cu=torch.tensor(num_draft).cumsum(0).to(torch.int32),
        logits=logits,
        draft=draft,
        bonus=torch.randint(0, V, (B, 1), generator=gen),
        md=md,
    )


def _direct(c):
    return fused.vllm_rejection_sample(
        c["draft"], c["num_draft"], c["K"], c["cu"], None, c["logits"], c["bonus"], c["md"]
    )


@pytest.mark.parametrize("shape", ["0.33", "0.32"])
def test_adapter_takes_the_target_signature(fake_vllm, shape):
    module = fake_vllm(_rejection_sample_033 if shape == "0.33" else _rejection_sample_032)
    adapter, why = _fused_noise._fused_adapter(module.rejection_sample, fused.vllm_rejection_sample)
    assert why is None
    want = inspect.signature(module.rejection_sample)
    assert inspect.signature(adapter) == want
    for name, p in inspect.signature(adapter).parameters.items():
        assert p.default is want.parameters[name].default  # vLLM's own default objects
    assert adapter._fastdispatch_impl is fused.vllm_rejection_sample


def test_033_forward_runs_the_fused_path(registry_core, fake_vllm):
    module = fake_vllm(_rejection_sample_033)
    mapping = _fused_noise._fused_noise_overrides()
    assert set(mapping) == {f"{MODULE}.rejection_sample", f"{MODULE}.sample_recovered_tokens"}
    registry_core  # noqa: B018 - the registry builds its overrides with this backend
    import fastdispatch

    fastdispatch.register_kernels(mapping)
    c = _greedy_case()
    got = _forward_033(module, c)
    assert torch.equal(got, _direct(c))
    assert got.tolist() == [
        [int(c["draft"][0]), int(c["logits"][1].argmax()), -1],
        [int(c["bonus"][1]), -1, -1],
        [int(c["draft"][2]), int(c["bonus"][2]), -1],
    ]
    # positionally, every argument (FLy off)
    args = (c["draft"], c["num_draft"], c["K"], c["cu"], None, c["logits"], c["bonus"], c["md"])
    assert torch.equal(module.rejection_sample(*args, False, None, False, None, None, 3), got)


def test_fly_request_is_refused_as_vllm_refuses_it_on_cpu(registry_core, fake_vllm):
    module = fake_vllm(_rejection_sample_033)
    import fastdispatch

    fastdispatch.register_kernels(_fused_noise._fused_noise_overrides())
    c = _greedy_case()
    with pytest.raises(NotImplementedError, match="FLy verification is not supported on CPU"):
        _forward_033(module, c, fly_window_size=2)
    assert fv.FLY_REFUSAL == "FLy verification is not supported on CPU."
    # and FLy off again right after: the refusal changed nothing
    assert torch.equal(_forward_033(module, c), _direct(c))


def test_fly_refusal_runs_nothing(fake_vllm):
    module = fake_vllm(_rejection_sample_033)
    ran = []
    # every value it is handed, by name
    impl = _function("impl", _PARAMS_032, "ran.append(dict(locals())); return 'result'", ran=ran)

    adapter, why = _fused_noise._fused_adapter(module.rejection_sample, impl)
    assert why is None
    with pytest.raises(NotImplementedError):
        adapter(1, [1], 1, 2, None, 3, 4, 5, fly_window_size=1, fly_entropy_threshold=0.1)
    assert ran == []
    # FLy off: every value handed over under its own name, the FLy-only ones dropped
    assert adapter(1, [1], 1, 2, None, 3, 4, 5, True, 6, True, None, 0.7, 9) == "result"
    assert ran[-1] == dict(
        draft_token_ids=1,
        num_draft_tokens=[1],
        max_spec_len=1,
        cu_num_draft_tokens=2,
        draft_probs=None,
        target_logits=3,
        bonus_token_ids=4,
        sampling_metadata=5,
        synthetic_mode=True,
        synthetic_conditional_rates=6,
        use_fp64_gumbel=True,
    )


def test_unknown_signature_leaves_that_function_to_vllm(fake_vllm, caplog):
    params = (*_PARAMS_032[:9], "some_new_switch=None")
    rejection_sample = _function("rejection_sample", params, "raise AssertionError")

    module = fake_vllm(rejection_sample)
    adapter, why = _fused_noise._fused_adapter(module.rejection_sample, fused.vllm_rejection_sample)
    assert adapter is None and "some_new_switch" in why
    with caplog.at_level(logging.WARNING, logger="fastdispatch.vllm"):
        mapping = _fused_noise._fused_noise_overrides()
    assert set(mapping) == {f"{MODULE}.sample_recovered_tokens"}  # the known one still
    assert any(
        "fused noise not installed" in r.message and "some_new_switch" in r.message
        for r in caplog.records
    )


@pytest.mark.parametrize(
    "params",
    ["*args", "**kwargs"],
)
def test_variadic_targets_are_not_guessed(params):
    ns = {}
    exec(f"def rejection_sample(draft_token_ids, {params}): pass", ns)
    adapter, why = _fused_noise._fused_adapter(ns["rejection_sample"], fused.vllm_rejection_sample)
    assert adapter is None and why


def test_a_target_missing_what_the_fused_path_needs_is_refused():
    def rejection_sample(draft_token_ids, num_draft_tokens, max_spec_len):
        pass

    adapter, why = _fused_noise._fused_adapter(rejection_sample, fused.vllm_rejection_sample)
    assert adapter is None and "cu_num_draft_tokens" in why
