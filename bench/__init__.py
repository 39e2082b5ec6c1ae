"""The fastdispatch benchmark: ``python -m bench`` (see ``bench/__main__.py`` for the CLI).

It measures, side by side in one process run and as ratios to an anchor measured in the same run:
launch overhead (direct call, compiled ``KernelOverride``, pure-Python twin, full owner chain,
vLLM's), the CPU kernels vLLM has shims for (plain-torch reference, ``kernels_cpu``, vLLM's
shim + C++ op), the
speculative-decoding sampling step grid (our ops, stock vLLM, vLLM with
``fastdispatch.vllm.install()``), the fused random step taken apart against its memory floors,
and thread scaling against the memcpy floor. Rows are typed records (``bench/_rows.py``), each with
a stable key ``<group id>/<slug>``. Timing rules: ``bench/_timing.py``; JSON schema:
``bench/_report.py``.
"""
