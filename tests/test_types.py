"""The public API's types, as a user's type checker sees them (mypy, strict)."""

import textwrap

import pytest

mypy_api = pytest.importorskip("mypy.api", reason="mypy comes with the test extra")

USER = textwrap.dedent('''
    import numpy as np
    import numpy.typing as npt

    import ast_ad
    from ast_ad.errors import ASTADError, UnsupportedSyntaxError

    Vector = npt.NDArray[np.float64]


    def loss(w: Vector, scale: float) -> float:
        return float(np.sum(w * w) * scale)


    def step(w: Vector, rate: float) -> Vector:
        return w - rate * ast_ad.grad(loss)(w, 2.0)  # the gradient has w's type: no Any returned


    def scale_gradient(w: Vector) -> float:
        return ast_ad.grad(loss, argnums=1)(w, 2.0)


    def both(w: Vector) -> tuple[Vector, float]:
        return ast_ad.grad(loss, argnums=(0, 1))(w, 2.0)


    def value_and_slope(w: Vector) -> tuple[float, Vector]:
        return ast_ad.value_and_grad(loss)(w, 2.0)


    dloss = ast_ad.grad(loss, argnums=(0, 1))
    reveal_type(dloss)
    dloss(np.ones(3))  # a missing argument
    ast_ad.grad(loss, argnums="w")  # argnums is an int or a tuple of ints
    ast_ad.grad(loss, jit="numbaa")  # jit is "numba" or None
    wrong: str = ast_ad.grad(loss)(np.ones(3), 2.0)  # an array, not a str


    @ast_ad.value_and_grad(argnums=1)
    def energy(x: float, y: float) -> float:
        return x * y


    @ast_ad.grad
    def decorated(x: float, y: float) -> float:
        return x * y


    energy(1.0, 2.0)
    slope: float = decorated(1.0, 2.0)
    out, out_dot = ast_ad.jvp(loss, (np.ones(3), 2.0), (np.ones(3), 0.0))
    value, vjp_fn = ast_ad.vjp(loss, np.ones(3), 2.0)
    adjoints: tuple[object, ...] = vjp_fn(1.0)
    hessian = ast_ad.hessian(loss)
    hessian(np.ones(3))  # the Hessian keeps the function's parameters
    ast_ad.jacobian(step)(np.ones(3), rate=0.1)
    table: str = str(ast_ad.explain(loss, np.ones(3), 2.0))
    dot: str = ast_ad.graph(loss).dot
    error: type[Exception] = UnsupportedSyntaxError
    assert issubclass(UnsupportedSyntaxError, ASTADError)
    removed: int = ast_ad.cache_clear()
''')

MISTAKES = {  # a line of USER -> what mypy says there
    "reveal_type": "Gradient[[numpy.ndarray",
    "dloss(np.ones(3))  #": 'Too few arguments',
    'argnums="w"': 'No overload variant of "grad"',
    'jit="numbaa"': 'No overload variant of "grad"',
    "wrong: str": 'Incompatible types in assignment',
    "hessian(np.ones(3))  #": 'Too few arguments',
}


@pytest.mark.long  # (mypy over a user's module: 16 s; .ci/run runs it as a step of its own)
def test_a_users_code_type_checks_and_mistakes_are_caught(tmp_path) -> None:
    path = tmp_path / "user.py"
    path.write_text(USER)
    out, err, status = mypy_api.run(
        ["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(path)]
    )
    lines = [line for line in out.splitlines() if line.startswith(str(path))]

    def at(text: str) -> list[str]:
        number = USER.splitlines().index(next(s for s in USER.splitlines() if text in s)) + 1
        return [line for line in lines if line.startswith(f"{path}:{number}:")]
    for where, said in MISTAKES.items():
        assert any(said in line for line in at(where)), (where, out)
    assert any("tuple[numpy.ndarray" in line and "float]]" in line for line in at("reveal_type")), (
        out
    )
    expected = {line for where in MISTAKES for line in at(where)}
    assert [line for line in lines if line not in expected] == [], out  # the rest checks, strictly
    assert status == 1


def test_the_package_is_typed() -> None:
    import pathlib

    import ast_ad
    assert (pathlib.Path(ast_ad.__file__).parent / "py.typed").exists()
