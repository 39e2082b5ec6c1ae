"""The fastdispatch benchmark: ``python -m bench`` (see ``bench/__main__.py`` for the CLI).

It measures, side by side in one process run and as ratios to an anchor measured in the same run:
launch overhead (direct call, compiled ``KernelOverride``, pure-Python twin, full owner chain,
vLLM's), the 11 CPU kernels (plain-torch reference, ``kernels_cpu``, vLLM's shim + C++ op), the
speculative-decoding sampling step grid (our ops, stock vLLM, vLLM with
``fastdispatch.vllm.install()``), and thread scaling against the memcpy floor. Timing rules:
``bench/_timing.py``; JSON schema: ``bench/_report.py``. Standalone scripts next to this package
dig into single topics: ``launch_overhead.py`` (adds the same-call-shape ``impl(**kw)`` row),
``vllm_dropin.py`` (vLLM's entry points, stock vs installed, ABBA order) and ``fused_sampling.py``
(the fused step against the memcpy of exactly the rows it reads).
"""
