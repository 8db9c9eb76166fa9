"""The public API's types, as a user's type checker sees them (mypy, strict)."""

import textwrap

import pytest

mypy_api = pytest.importorskip("mypy.api", reason="mypy comes with the test extra")

USER = textwrap.dedent('''
    import numpy as np
    import numpy.typing as npt

    import ast_ad
    from ast_ad.errors import ASTADError, UnsupportedSyntaxError


    def loss(w: npt.NDArray[np.float64], scale: float) -> float:
        return float(np.sum(w * w) * scale)


    dloss = ast_ad.grad(loss, argnums=(0, 1))
    reveal_type(dloss)
    dloss(np.ones(3), 2.0)
    dloss(np.ones(3))  # a missing argument
    ast_ad.grad(loss, argnums="w")  # argnums is an int or a tuple of ints


    @ast_ad.value_and_grad(argnums=1)
    def energy(x: float, y: float) -> float:
        return x * y


    energy(1.0, 2.0)
    out, out_dot = ast_ad.jvp(loss, (np.ones(3), 2.0), (np.ones(3), 0.0))
    value, vjp_fn = ast_ad.vjp(loss, np.ones(3), 2.0)
    adjoints: tuple[object, ...] = vjp_fn(1.0)
    hessian = ast_ad.hessian(loss)
    table: str = str(ast_ad.explain(loss, np.ones(3), 2.0))
    dot: str = ast_ad.graph(loss).dot
    error: type[Exception] = UnsupportedSyntaxError
    assert issubclass(UnsupportedSyntaxError, ASTADError)
    removed: int = ast_ad.cache_clear()
''')


def test_a_users_code_type_checks_and_mistakes_are_caught(tmp_path) -> None:
    path = tmp_path / "user.py"
    path.write_text(USER)
    out, err, status = mypy_api.run(["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
                                     str(path)])
    lines = [line for line in out.splitlines() if line.startswith(str(path))]

    def at(text: str) -> list[str]:
        number = USER.splitlines().index(next(s for s in USER.splitlines() if text in s)) + 1
        return [line for line in lines if line.startswith(f"{path}:{number}:")]
    assert any("Gradient[[w: numpy.ndarray" in line and "scale: float]]" in line for line in at("reveal_type"))
    assert any('Missing positional argument "scale"' in line for line in at("dloss(np.ones(3))  #"))
    assert any('No overload variant of "grad"' in line and '"str"' in line for line in at('argnums="w"'))
    expected = {*at("reveal_type"), *at("dloss(np.ones(3))  #"), *at('argnums="w"')}
    assert [line for line in lines if line not in expected] == [], out  # the rest checks, strictly
    assert status == 1


def test_the_package_is_typed() -> None:
    import pathlib

    import ast_ad
    assert (pathlib.Path(ast_ad.__file__).parent / "py.typed").exists()
