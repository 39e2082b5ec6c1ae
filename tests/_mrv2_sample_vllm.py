"""vLLM's sampler random stream and Gumbel sampling, run under Triton's interpreter.

Run as a script with ``TRITON_INTERPRET=1`` by ``tests/test_mrv2_sample.py``: ``python
_mrv2_sample_vllm.py IN OUT`` reads the inputs ``torch.save``d in IN and saves vLLM's results in
OUT -- the murmur3 hash and uniforms of vLLM's ``gumbel.py`` for each (seed, position, key), and
the tokens ``gumbel_sample``'s kernel and host reduction choose for some logits.
"""

import sys

import torch
import triton
import triton.language as tl

from fdkit import vllm_source

_ns = vllm_source.load("vllm.v1.worker.gpu.sample.gumbel")
murmur3_hash32 = _ns["murmur3_hash32"]
murmur3_uniform32 = _ns["murmur3_uniform32"]
murmur3_uniform64 = _ns["murmur3_uniform64"]


@triton.jit
def _draws(seed_ptr, pos_ptr, key_ptr, hash_ptr, u32_ptr, u64_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    seed = tl.load(seed_ptr + i, mask=m, other=0)
    pos = tl.load(pos_ptr + i, mask=m, other=0)
    key = tl.load(key_ptr + i, mask=m, other=0).to(tl.uint32)
    tl.store(hash_ptr + i, murmur3_hash32(seed, pos, key).to(tl.int64), mask=m)
    tl.store(u32_ptr + i, murmur3_uniform32(seed, pos, key), mask=m)
    tl.store(u64_ptr + i, murmur3_uniform64(seed, pos, key), mask=m)


def draws(seeds, positions, keys):
    n = seeds.numel()
    out = (torch.empty(n, dtype=torch.int64), torch.empty(n), torch.empty(n, dtype=torch.float64))
    block = 1024
    _draws[(triton.cdiv(n, block),)](seeds, positions, keys, *out, n, BLOCK=block)
    return out


def sample(logits, mapping, temperature, seeds, positions, fp64, drafting):
    """``gumbel_sample``'s kernel launch and reduction, as its host code does them."""
    kernel = _ns["_gumbel_sample_kernel"]
    n, v = logits.shape
    block = 1024
    nb = triton.cdiv(v, block)
    local_argmax = torch.empty(n, nb, dtype=torch.int64)
    local_max = torch.empty(n, nb, dtype=torch.float64 if fp64 else torch.float32)
    kernel[(n, nb)](
        local_argmax, nb, local_max, nb, None, 0, 0, None, None, 0, logits, v, mapping,
        seeds, positions, temperature, v, BLOCK_SIZE=block, IS_DRAFTING=drafting,
        APPLY_TEMPERATURE=True, USE_FP64=fp64, PER_TOKEN_COL=False,
    )  # fmt: skip
    best = local_max.argmax(dim=-1, keepdim=True)
    return local_argmax.gather(dim=-1, index=best).view(-1)


if __name__ == "__main__":
    given = torch.load(sys.argv[1])
    result = {"draws": draws(*given["draws"])}
    result["tokens"] = [sample(*args) for args in given["samples"]]
    torch.save(result, sys.argv[2])
