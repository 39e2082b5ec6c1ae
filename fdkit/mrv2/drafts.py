"""Launch cases for Model Runner V2's drafts kernels (see ``fdkit.mrv2``).

Each case is a launch the way the speculator makes it (``vllm/v1/worker/gpu/spec_decode/``):
persistent buffers longer than the launch touches, request-state indices that are a random
subset of the states in random order, queries of a decode step (one token plus drafts, some
rejected) beside chunked-prefill ones.
"""

import torch

from fdkit._case import Case, Out, batch, gen, next_pow2


def _ints(rng, n, low, high, dtype):
    """``n`` random ints in ``[low, high]`` as a tensor of ``dtype``."""
    return torch.tensor([rng.randint(low, high) for _ in range(n)], dtype=dtype)


def _queries(rng, R, longest=6):
    """Query lengths (>= 1: every scheduled request has a token) and their offsets."""
    lens = [rng.randint(1, longest) for _ in range(R)]
    qsl = [0]
    for n in lens:
        qsl.append(qsl[-1] + n)
    return lens, qsl


def _states(rng, R):
    """``R`` distinct request-state indices out of a few more states, in random order."""
    n_states = R + rng.randint(0, 4)
    return rng.sample(range(n_states), R), max(n_states, 1)


def _tokens(rng, n, idx, vocab=300):
    return _ints(rng, n, 0, vocab - 1, idx)


def case_standalone_ar_prepare_prefill_inputs_kernel(rng, idx, scale):
    R = batch(rng, 6)
    lens, qsl = _queries(rng, R)
    states, n_states = _states(rng, R)
    num_tokens = qsl[-1]
    pad = rng.randint(0, 3)
    max_num_reqs = R + rng.randint(0, 4)
    max_model_len = rng.randint(8, 64)
    positions = []
    for n in lens:  # a request's positions are consecutive; some run into the length limit
        first = rng.randint(0, max_model_len + 2)
        positions += list(range(first, first + n))
    rejected = [rng.randint(0, n - 1) for n in lens]
    last_sampled = _tokens(rng, n_states, idx)
    if idx == torch.int64 and n_states and rng.random() < 0.3:
        last_sampled[rng.randrange(n_states)] = 2**33 + rng.randint(0, 9)  # cast to int32
    seq_lens = [rng.randint(qsl[i + 1] - qsl[i], max_model_len + 1) for i in range(R)]
    expanded = num_tokens + R
    return Case(
        "standalone_ar_prepare_prefill_inputs_kernel",
        (R,),
        dict(
            target_input_ids_ptr=_tokens(rng, num_tokens + pad, idx),
            target_positions_ptr=torch.tensor(positions + [0] * pad, dtype=idx),
            last_sampled_ptr=last_sampled.view(-1, 1) if rng.random() < 0.5 else last_sampled,
            idx_mapping_ptr=torch.tensor(states, dtype=idx),
            out_input_ids_ptr=Out(expanded + rng.randint(0, 3), idx),
            out_positions_ptr=Out(expanded + rng.randint(0, 3), idx),
            last_token_indices_ptr=Out(max(R, max_num_reqs) + rng.randint(0, 2), idx),
            out_query_start_loc_ptr=Out(max_num_reqs + 1 + rng.randint(0, 2), idx),
            out_seq_lens_ptr=Out(max(R, max_num_reqs) + rng.randint(0, 2), idx),
            query_start_loc_ptr=torch.tensor(qsl + [qsl[-1]] * pad, dtype=idx),
            seq_lens_ptr=torch.tensor(seq_lens + [0] * pad, dtype=idx),
            num_rejected_ptr=torch.tensor(rejected, dtype=idx),
            max_num_reqs=max_num_reqs,
            max_model_len=max_model_len,
            BLOCK_SIZE=min(512, next_pow2(max(lens, default=0) + 2)),
        ),
        note=f"R={R} lens={lens} rejected={rejected} max_num_reqs={max_num_reqs}",
    )


#: contract name -> case(rng, idx, scale)
CASES = {
    "standalone_ar_prepare_prefill_inputs_kernel": (
        case_standalone_ar_prepare_prefill_inputs_kernel
    ),
}

_UNUSED = gen
