"""Hypothesis profiles: ``ci`` (the default, bounded: 30 examples a test, so that the default
run keeps to its five minutes on two shared cores) and ``long`` (``pytest
--hypothesis-profile=long``)."""

import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=30, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# generated modules are written to files (ast_ad/backend/load.py): the tests' go to a directory of
# their own, removed when the run ends (as are the tests' own temporary folders, but a failed
# test's: ``tmp_path_retention_policy``)
if "AST_AD_CACHE_DIR" not in os.environ:
    _CACHE = tempfile.mkdtemp(prefix="ast_ad-tests-")
    os.environ["AST_AD_CACHE_DIR"] = _CACHE

    def pytest_sessionfinish(session: object, exitstatus: int) -> None:
        shutil.rmtree(_CACHE, ignore_errors=True)


@pytest.fixture
def lowerings(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often ``jvp`` lowers a function (``directional.lower``, counted in ``["n"]``): a call
    that runs its module directly lowers nothing."""
    from ast_ad.api import directional

    counted = {"n": 0}
    real = directional.lower

    def lower(fun, args):
        counted["n"] += 1
        return real(fun, args)

    monkeypatch.setattr(directional, "lower", lower)
    return counted
