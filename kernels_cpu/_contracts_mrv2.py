"""Model Runner V2's kernels in the contract table: one module per family, read here in order.

* ``_contracts_mrv2_inputs`` -- the step's inputs: block tables, slot mappings, staged buffer
  writes, prefill/decode input ids and positions, the post-step update, ngram drafts;
* ``_contracts_mrv2_sample`` -- the sampler: temperature, Gumbel sampling and its combine,
  the greedy split argmax, min-p, penalties, logit bias, bad words, logprobs, the
  structured-output bitmask;
* ``_contracts_mrv2_spec`` -- the rejection sampler (``rejection_sampler_utils``, the flattening
  and gathering of ``spec_decode/rejection_sampler.py``);
* ``_contracts_mrv2_outputs`` -- what the sampler reports besides tokens: NaN counts, the
  compacted sampling masks;
* ``_contracts_mrv2_memory`` -- the KV cache's block zeroing;
* ``_contracts_mrv2_drafts`` -- the drafters: each speculator's input kernels, the ngram scan.

Every contract here has ``runner="v2"``: vLLM launches the kernel directly (``kernel[grid]``),
our rebinding pass puts the CPU kernel in its place (``fastdispatch.vllm._mrv2``), and the parity
reference is vLLM's own Triton kernel under the interpreter (``tests/test_mrv2_parity.py``).
"""

from ._contracts_mrv2_drafts import CONTRACTS as _DRAFTS
from ._contracts_mrv2_inputs import CONTRACTS as _INPUTS
from ._contracts_mrv2_memory import CONTRACTS as _MEMORY
from ._contracts_mrv2_outputs import CONTRACTS as _OUTPUTS
from ._contracts_mrv2_sample import CONTRACTS as _SAMPLE
from ._contracts_mrv2_spec import CONTRACTS as _SPEC
from .contracts import Contract

MRV2_CONTRACTS: tuple[Contract, ...] = _INPUTS + _SAMPLE + _OUTPUTS + _SPEC + _DRAFTS + _MEMORY

for _c in MRV2_CONTRACTS:  # noqa: B007
    if _c.runner != "v2":
        raise ImportError(
            f"kernels_cpu.{__name__}: {_c.name} is listed as Model Runner V2's "
            f"kernel but has runner={_c.runner!r}"
        )
