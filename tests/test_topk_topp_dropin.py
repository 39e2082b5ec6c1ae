"""The top-k/top-p drop-in (``fastdispatch._topk_topp_dropin.adapter_for``) for every signature
vLLM has had: ``(logits, k, p)`` (0.27-0.32), ``(logits, k, p, has_topp_only_rows=True)``
(0.33, 0.34), the Triton entry's ``mask_value``, and a later keyword with a default. The
targets are stand-ins with those signatures that record whether vLLM's own function ran.
"""

import inspect
import math

import pytest
import torch

from fastdispatch._topk_topp_dropin import adapter_for
from kernels_cpu import top_k_top_p


def _inputs():
    g = torch.Generator().manual_seed(7)
    logits = torch.randn(4, 50, generator=g)
    k = torch.tensor([3, 50, 7, 1], dtype=torch.int32)
    p = torch.tensor([0.9, 0.5, 1.0, 0.7], dtype=torch.float32)
    return logits, k, p


def _expected(logits, k, p, mask_value=-math.inf):
    out = logits.clone()
    top_k_top_p(out, k, p, mask_value)
    return out


def test_0_32_signature():
    ran = []

    def apply_top_k_top_p(logits, k, p):
        ran.append(True)
        return logits

    adapter, why = adapter_for(apply_top_k_top_p)
    assert why is None
    assert inspect.signature(adapter) == inspect.signature(apply_top_k_top_p)
    logits, k, p = _inputs()
    want = _expected(logits, k, p)
    assert adapter(logits, k, p) is logits and torch.equal(logits, want) and not ran
    adapter(torch.randn(2, 5, dtype=torch.float64), None, p[:2])  # a dtype the kernel refuses
    assert ran == [True]


@pytest.mark.parametrize("hint", [True, False])
def test_0_33_signature_ignores_the_hint(hint):
    ran = []

    def apply_top_k_top_p(logits, k, p, has_topp_only_rows=True):
        ran.append(has_topp_only_rows)
        return logits

    adapter, why = adapter_for(apply_top_k_top_p)
    assert why is None
    assert inspect.signature(adapter) == inspect.signature(apply_top_k_top_p)
    logits, k, p = _inputs()
    want = _expected(logits, k, p)
    adapter(logits, k, p, has_topp_only_rows=hint)
    assert torch.equal(logits, want) and not ran
    logits, k, p = _inputs()
    adapter(logits, k, p, hint)  # positionally, as vLLM may
    assert torch.equal(logits, want) and not ran


def test_the_triton_entry_gets_its_mask_value():
    def apply_top_k_top_p_triton(logits, k, p, mask_value=float("-inf"), has_topp_only_rows=True):
        raise AssertionError("vLLM's function must not run")

    adapter, why = adapter_for(apply_top_k_top_p_triton)
    assert why is None
    logits, k, p = _inputs()
    want = _expected(logits, k, p, -5.0)
    adapter(logits, k, p, mask_value=-5.0)
    assert torch.equal(logits, want)


def test_a_later_keyword_is_taken_at_its_default_and_left_to_vllm_otherwise():
    ran = []

    def apply_top_k_top_p(logits, k, p, has_topp_only_rows=True, *, renormalize=None):
        ran.append(renormalize)
        return logits

    adapter, why = adapter_for(apply_top_k_top_p)
    assert why is None
    assert inspect.signature(adapter) == inspect.signature(apply_top_k_top_p)
    logits, k, p = _inputs()
    want = _expected(logits, k, p)
    adapter(logits, k, p)
    assert torch.equal(logits, want) and ran == []
    logits, k, p = _inputs()
    adapter(logits, k, p, renormalize="softmax")
    assert ran == ["softmax"] and torch.equal(logits, _inputs()[0])  # vLLM's own, untouched


def test_signatures_it_cannot_take_are_left_to_vllm():
    def required_extra(logits, k, p, generator):
        pass

    def other_order(k, logits, p):
        pass

    def star(logits, k, p, **kw):
        pass

    for target in (required_extra, other_order, star):
        adapter, why = adapter_for(target)
        assert adapter is None and why.startswith("unknown signature"), target


def test_no_filter_and_zero_rows_need_no_kernel():
    def apply_top_k_top_p(logits, k, p, has_topp_only_rows=True):
        raise AssertionError("vLLM's function must not run")

    adapter, _ = adapter_for(apply_top_k_top_p)
    logits = torch.randn(3, 9)
    assert adapter(logits, None, None) is logits
    empty = torch.randn(0, 9)
    assert adapter(empty, torch.empty(0, dtype=torch.int32), None) is empty
