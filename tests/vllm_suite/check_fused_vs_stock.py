"""The fused sampler's comparisons with stock vLLM, run where vLLM is importable.

``tests/test_fused_op.py`` holds them (uncollected there: the dev venv has no vLLM); they run here,
with vLLM in its stock state (fastdispatch uninstalled) for the duration of each test.
"""

import pytest
import test_fused_op as fused_op


@pytest.fixture
def stock(modes):
    modes.stock()
    modes.check("stock")
    yield


def test_signatures_match_vllm(stock):
    fused_op.vllm_signatures_match()


def test_same_law_as_stock_vllm(stock):
    fused_op.vllm_same_law_as_stock()
