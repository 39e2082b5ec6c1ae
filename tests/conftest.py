"""The main suite's shared fixtures (pytest finds them here; no test imports them).

``core`` runs a test once against the compiled module (``fastdispatch._core``) and once against
its pure-Python twin (``fastdispatch._core_py``); ``clean_registry`` gives a test an empty
registry; ``registry_core`` the registry building its overrides with either backend.
"""

import pytest
from _runtime_helpers import BACKENDS, load_core


@pytest.fixture(params=BACKENDS)
def core(request):
    return load_core(request.param)


@pytest.fixture
def clean_registry():
    """Run a test on an empty registry; afterwards unregister what it registered.

    Registrations made before the test (e.g. ``fastdispatch.ops`` registering ``kernels_cpu``
    over its Triton kernels at import) are set aside first and put back after, so the tests
    here can assert on the whole registry whatever else the session imported.
    """
    import fastdispatch

    saved = {name: entry[1] for name, entry in fastdispatch._registry.items()}
    if saved:
        fastdispatch.unregister_kernels()
    yield fastdispatch
    if fastdispatch._registry:
        fastdispatch.unregister_kernels()
    if saved:
        fastdispatch.register_kernels(saved)
    from fakepkg_rt import CALLS

    CALLS.clear()


@pytest.fixture(params=BACKENDS)
def registry_core(request, clean_registry, monkeypatch):
    """The registry, building its overrides with the compiled module or with the twin.

    ``clean_registry`` comes before ``monkeypatch`` so that its teardown (restoring earlier
    registrations) runs after the backend patch is undone, with the session's own backend.
    """
    from fastdispatch import _registration

    mod = load_core(request.param)
    monkeypatch.setattr(_registration, "core", mod)
    return mod
