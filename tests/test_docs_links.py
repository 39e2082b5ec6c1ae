"""The documentation's links resolve, the README stays short, and its figures are the benchmark's.

* Every relative link and image of README.md and docs/*.md names a file of the repository, and an
  ``#anchor`` names a heading of the markdown file it points into, by GitHub's rule for heading
  ids. Links inside code (fenced blocks, inline code) are text, not links; ``http:``/``https:``
  and other absolute addresses are not checked (no network here).
* The README's headline table quotes docs/bench_figures.md (the benchmark's generated page), row
  for row, so the figures a newcomer reads are a run's and not retyped.
* Where the JSON of that run is committed beside the page, the page is what ``python -m bench
  --from-json`` renders from it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FIGURES = REPO / "docs" / "bench_figures.md"
FIGURES_JSON = REPO / "docs" / "bench_figures.json"

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target) and ![alt](target); the target may be <...> or end at the first space
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _prose_lines(path):
    """``[(line number, text)]`` of a markdown file outside its fenced code blocks."""
    out, fence = [], None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
        else:
            out.append((number, line))
    return out


def _slug(text):
    """GitHub's id for a heading: its text as rendered (code spans, links and emphasis reduced to
    their text), lower-cased, every character that is not a letter, digit, space, ``-`` or ``_``
    dropped, spaces turned into ``-``."""
    text = _CODE_SPAN.sub(lambda m: m.group(2), text)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"(\*{1,3})(.+?)\1", r"\2", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = "".join(c for c in text.strip().lower() if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path):
    """The ids of a markdown file's headings, with GitHub's ``-1``, ``-2`` for repeats."""
    seen, out = {}, set()
    for _, line in _prose_lines(path):
        m = _HEADING.match(line)
        if not m:
            continue
        slug = _slug(m.group(2))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(path):
    """``[(line number, target)]`` of a markdown file's links and images outside code."""
    out = []
    for number, line in _prose_lines(path):
        text = re.sub(r"\\[\[\]()]", "_", _CODE_SPAN.sub("", line))  # \[ is a bracket, not a link
        for m in _LINK.finditer(text):
            out.append((number, m.group(1).strip("<>")))
    return out


def test_slugs_follow_githubs_rule():
    assert _slug("The runtime: a drop-in for `vllm.triton_utils.dispatcher`") == (
        "the-runtime-a-drop-in-for-vllmtriton_utilsdispatcher"
    )
    assert _slug("linux/arm64") == "linuxarm64"
    assert _slug("Top-k / top-p") == "top-k--top-p"
    assert _slug("`fast_launch` on a GPU") == "fast_launch-on-a-gpu"
    assert _slug("Results on the H200") == "results-on-the-h200"


def test_the_readme_reads_in_five_minutes():
    # the README says what, who, install, the two commands, one example per use, the headline
    # figures and where the rest is; everything else belongs to a page of docs/
    lines = (REPO / "README.md").read_text("utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move detail into docs/"


def test_the_docs_have_links():
    # a parser that found nothing would pass the test below vacuously
    assert len(links(REPO / "README.md")) >= 10
    assert "model-runner-v2" in anchors(REPO / "docs" / "vllm.md")


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(path):
    broken = []
    for number, target in links(path):
        if _SCHEME.match(target) or target.startswith("//"):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / unquote(file_part)).resolve() if file_part else path
        where = f"{path.relative_to(REPO)}:{number}: {target}"
        if not dest.exists():
            broken.append(f"{where} (no file {file_part})")
        elif REPO not in dest.parents and dest != REPO:
            broken.append(f"{where} (outside the repository)")
        elif anchor and dest.suffix == ".md" and unquote(anchor) not in anchors(dest):
            broken.append(f"{where} (no heading #{anchor} in {dest.relative_to(REPO)})")
    assert not broken, "\n".join(broken)


def _table_rows(lines, header_start):
    """The ``[cells]`` of the markdown table whose header row starts with ``header_start``."""
    rows, inside = [], False
    for line in lines:
        if line.startswith(header_start):
            inside = True
            continue
        if inside:
            if not line.startswith("|"):
                break
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-:") for c in cells):
                rows.append(cells)
    return rows


HEADLINE_HEADER = "| headline (two rows of one group, same run) |"


def test_the_readme_headlines_quote_the_generated_figures():
    readme = (REPO / "README.md").read_text("utf-8").splitlines()
    readme = _table_rows(readme, HEADLINE_HEADER)
    page = _table_rows(FIGURES.read_text("utf-8").splitlines(), HEADLINE_HEADER)
    assert readme and page, "the README or docs/bench_figures.md lost its headline table"
    measured = {cells[0]: cells[1] for cells in page}
    wrong = [
        f"{label}: README {value!r}, docs/bench_figures.md {measured.get(label)!r}"
        for label, value, *_ in readme
        if measured.get(label) != value
    ]
    assert not wrong, "\n".join(wrong)


def test_the_figures_page_is_the_render_of_its_json():
    if not FIGURES_JSON.exists():
        pytest.skip("no docs/bench_figures.json committed beside the page (docs/benchmark.md)")
    sys.path.insert(0, str(REPO))
    from bench import _report

    doc = json.loads(FIGURES_JSON.read_text("utf-8"))
    assert _report.validate(doc) == []
    assert FIGURES.read_text("utf-8") == _report.markdown(doc), (
        "docs/bench_figures.md differs from its JSON: re-render it with `python -m bench "
        "--from-json docs/bench_figures.json --markdown docs/bench_figures.md`"
    )
