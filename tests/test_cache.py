"""The persistent cache (``ast_ad/backend/store.py``): a later process reads a stored module instead
of transforming, and anything that would change the generated code makes it transform again."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ast_ad
from ast_ad import transform
from ast_ad.backend import load, store

MODEL = '''\
import os

import numpy as np

from helper import squash

SCALE = float(os.environ.get("SCALE", "2.0"))


def f(x, w):
    """A 30-line function: a loop, a branch, a helper in another module, a global read as data."""
    total = 0.0
    h = x
    for k in range(3):
        z = w @ h
        if k % 2 == 0:
            h = np.tanh(z)
        else:
            h = squash(z)
        total = total + np.sum(h * h)
    y = np.log1p(np.exp(h))
    u = y * SCALE
    v = np.sin(u) + np.cos(y)
    a = np.sum(v * x)
    b = np.mean(u)
    c = a * b
    d = c / (1.0 + a * a)
    e = np.sqrt(1.0 + d * d)
    q = e + total
    r = q * q
    s = r - np.log(1.0 + r)
    t = s + np.sum(x * x)
    return t
'''

HELPER = '''\
import numpy as np


def squash(z):
    return z / (1.0 + np.abs(z))
'''

RUN = '''\
import json, sys
import numpy as np
import ast_ad
from ast_ad import transform
import model
x = np.linspace(-1.0, 1.0, 4)
w = np.arange(16.0).reshape(4, 4) / 20.0
gx, gw = ast_ad.grad(model.f, argnums=(0, 1))(x, w)
print(json.dumps({"counts": transform.counts, "gx": gx.tolist(), "gw": gw.tolist(),
                  "file": ast_ad.grad(model.f, argnums=(0, 1)).__wrapped__.__code__.co_filename}))
'''


def _project(tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "helper.py").write_text(HELPER)
    (tmp_path / "run.py").write_text(RUN)
    return tmp_path


def _run(tmp_path, **env):
    done = subprocess.run(
        [sys.executable, "run.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "AST_AD_CACHE_DIR": str(tmp_path / "cache"), **env},
    )
    return json.loads(done.stdout)


def _expected(tmp_path, scale="2.0", monkeypatch=None):
    """The gradient in this process, by the tracer (an independent oracle), of the model as it is on
    disk."""
    namespace = {}
    sys.path.insert(0, str(tmp_path))
    try:
        os.environ["SCALE"] = scale
        exec(
            compile((tmp_path / "model.py").read_text(), str(tmp_path / "model.py"), "exec"),
            namespace,
        )
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("helper", None)
        os.environ.pop("SCALE", None)
    x, w = np.linspace(-1.0, 1.0, 4), np.arange(16.0).reshape(4, 4) / 20.0
    return ast_ad.tracer.grad(namespace["f"], argnums=(0, 1))(x, w)


def _close(run, expected):
    np.testing.assert_allclose(run["gx"], expected[0], rtol=1e-12)
    np.testing.assert_allclose(run["gw"], expected[1], rtol=1e-12)


def test_a_later_process_reads_the_stored_module(tmp_path) -> None:
    project = _project(tmp_path)
    cold, warm = _run(project), _run(project)
    assert cold["counts"] == {"built": 1, "stored": 1, "fetched": 0}
    assert warm["counts"] == {"built": 0, "stored": 0, "fetched": 1}
    assert warm["gx"] == cold["gx"] and warm["gw"] == cold["gw"]  # the same code: the same bits
    assert warm["file"] == cold["file"] and warm["file"].startswith(str(tmp_path / "cache"))
    _close(warm, _expected(project))


def test_data_the_function_reads_is_read_again(tmp_path) -> None:
    """A global the code reads as data (not part of its text) takes its value in the new process."""
    project = _project(tmp_path)
    _run(project, SCALE="2.0")
    warm = _run(project, SCALE="3.0")
    assert warm["counts"]["fetched"] == 1
    _close(warm, _expected(project, scale="3.0"))


def test_a_changed_helper_in_another_module_is_transformed_again(tmp_path) -> None:
    project = _project(tmp_path)
    _run(project)
    (project / "helper.py").write_text(HELPER.replace("1.0 + np.abs(z)", "2.0 + np.abs(z)"))
    changed = _run(project)
    assert changed["counts"] == {"built": 1, "stored": 1, "fetched": 0}
    _close(changed, _expected(project))


def test_a_changed_function_is_transformed_again(tmp_path) -> None:
    project = _project(tmp_path)
    _run(project)
    (project / "model.py").write_text(MODEL.replace("r - np.log(1.0 + r)", "r - np.log(2.0 + r)"))
    changed = _run(project)
    assert changed["counts"]["built"] == 1 and changed["counts"]["fetched"] == 0
    _close(changed, _expected(project))


def test_a_rebound_helper_is_not_taken_for_the_stored_one(tmp_path) -> None:
    """The same source, but a global now names another function: the stored module is not used."""
    project = _project(tmp_path)
    (project / "helper.py").write_text(HELPER + textwrap.dedent('''
        import os


        def other(z):
            return z * z


        if os.environ.get("OTHER"):
            squash = other  # noqa: F811
        '''))
    _run(project)
    rebound = _run(project, OTHER="1")
    assert rebound["counts"]["built"] == 1 and rebound["counts"]["fetched"] == 0


def test_processes_at_once_each_read_a_whole_file(tmp_path) -> None:
    project = _project(tmp_path)
    env = {**os.environ, "AST_AD_CACHE_DIR": str(tmp_path / "cache")}
    runs = [
        subprocess.Popen(
            [sys.executable, "run.py"], cwd=project, stdout=subprocess.PIPE, text=True, env=env
        )
        for _ in range(3)
    ]
    outputs = [json.loads(p.communicate(timeout=120)[0]) for p in runs]
    assert all(p.returncode == 0 for p in runs)
    assert all(o["gx"] == outputs[0]["gx"] for o in outputs)
    for index in (tmp_path / "cache" / "index").glob("*.json"):
        json.loads(index.read_text())  # whole, never half written
    assert _run(project)["counts"]["fetched"] == 1


# ---- in one process: the key, damaged files, what is not stored ----------------------------------


def _fresh() -> None:
    transform.forget()


def cubic(x):
    return x * x * x + np.sin(x)


def test_clearing_memory_reads_the_module_back(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("AST_AD_CACHE_DIR", str(tmp_path))
    _fresh()
    first = ast_ad.grad(cubic)(1.5)
    text = ast_ad.source(ast_ad.grad(cubic))
    _fresh()
    fetched = transform.counts["fetched"]
    assert ast_ad.grad(cubic)(1.5) == first == pytest.approx(3 * 1.5 ** 2 + np.cos(1.5), rel=1e-15)
    assert transform.counts["fetched"] == fetched + 1 and ast_ad.source(ast_ad.grad(cubic)) == text
    out, out_dot = ast_ad.jvp(cubic, (1.5,), (1.0,))  # forward mode is stored too
    _fresh()
    assert (
        ast_ad.jvp(cubic, (1.5,), (1.0,)) == (out, out_dot)
        and transform.counts["fetched"] == fetched + 2
    )


def test_a_damaged_file_is_transformed_again(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("AST_AD_CACHE_DIR", str(tmp_path))
    _fresh()
    expected = ast_ad.grad(cubic)(0.5)
    for generated in tmp_path.glob("cubic_vjp-*.py"):
        generated.write_text(generated.read_text().replace("3", "4"))
    for index in (tmp_path / "index").glob("*.json"):
        index.write_text(index.read_text()[:40])
    _fresh()
    built = transform.counts["built"]
    assert ast_ad.grad(cubic)(0.5) == expected and transform.counts["built"] == built + 1


def test_the_key_covers_rules_specialization_printer_and_switch(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("AST_AD_CACHE_DIR", str(tmp_path))
    spec = ("<fn>", (0,), True, (-1,))
    base = store.key(cubic, spec)
    assert base is not None and store.key(cubic, spec) == base
    assert store.key(cubic, ("<fn>", (0,), True, (0,))) != base
    monkeypatch.setenv("AST_AD_PRINTER", "unparse")
    assert store.key(cubic, spec) != base
    monkeypatch.delenv("AST_AD_PRINTER")

    def softsign(x):
        return x / (1 + abs(x))

    monkeypatch.setattr(
        ast_ad.core.registry, "USER_CHANGES", list(ast_ad.core.registry.USER_CHANGES)
    )
    ast_ad.extend.defvjp(softsign, lambda g, ans, x: g / (1 + abs(x)) ** 2)
    with_rule = store.key(cubic, spec)
    assert with_rule != base
    ast_ad.extend.defvjp(softsign, lambda g, ans, x: 2 * g / (1 + abs(x)) ** 2)
    assert store.key(cubic, spec) not in (base, with_rule)
    monkeypatch.setenv("AST_AD_CACHE", "0")
    assert store.key(cubic, spec) is None


def _square(x):
    return x * x


def test_what_cannot_be_found_again_is_not_stored(tmp_path, monkeypatch) -> None:
    """A gradient made while transforming exists only in this process: the module is not stored."""
    monkeypatch.setenv("AST_AD_CACHE_DIR", str(tmp_path))

    def uses(x):
        return ast_ad.grad(_square)(x) * x
    assert ast_ad.grad(uses)(2.0) == 8.0
    entries = [
        json.loads(index.read_text())["entry"] for index in (tmp_path / "index").glob("*.json")
    ]
    assert "square_vjp" in entries and "uses_vjp" not in entries  # _square's own gradient is stored


@pytest.mark.parametrize("value", [np.arange(3.0), (1, 2.5, "a"), {"k": 1}])
def test_stable_spellings_do_not_depend_on_the_process(value) -> None:
    assert store._stable(value) == store._stable(value) is not None
    assert "0x" not in store._stable(value)


def test_objects_known_by_address_are_not_keyed() -> None:
    assert store._stable(object()) is None

    def rule(g):
        return g * late  # noqa: F821 -- bound below, after the rule is made
    assert store._stable(rule) is None  # an empty closure cell has no value to spell
    late = 2.0
    assert store._stable(rule) is not None and late == 2.0
    assert store.function_hash(len) is None  # no source, no code


def test_cache_clear_removes_the_index(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("AST_AD_CACHE_DIR", str(tmp_path))
    _fresh()
    ast_ad.grad(cubic)(1.0)
    assert list((tmp_path / "index").glob("*.json"))
    assert ast_ad.cache_clear() >= 2
    assert not list((tmp_path / "index").glob("*.json")) and not list(tmp_path.glob("*.py"))
    assert next(load.places()) == tmp_path
