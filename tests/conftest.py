"""Hypothesis profiles: ``ci`` (the default, bounded) and ``long`` (``pytest
--hypothesis-profile=long``)."""

import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True,
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
