"""Hypothesis profiles: ``ci`` (the default, bounded) and ``long`` (``pytest --hypothesis-profile=long``)."""

import os
import tempfile

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# generated modules are written to files (ast_ad/load.py): the tests' go to a directory of their own
os.environ.setdefault("AST_AD_CACHE_DIR", tempfile.mkdtemp(prefix="ast_ad-tests-"))
