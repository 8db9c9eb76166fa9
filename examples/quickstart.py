"""The worked example: y = log(x1) + x1*x2 - sin(x2) at (2, 3), by ast_ad and by its tracer."""

import numpy as np

import ast_ad


def f(x1, x2):
    return np.log(x1) + x1 * x2 - np.sin(x2)


def main() -> None:
    df = ast_ad.value_and_grad(f, argnums=(0, 1))
    y, (dx1, dx2) = df(2.0, 3.0)
    print(f"y      = {y:.12f}")
    print(f"dy/dx1 = {dx1:.12f}")
    print(f"dy/dx2 = {dx2:.12f}")
    print()
    print("The generated gradient:")
    print(ast_ad.source(df))
    traced_y, (tx1, tx2) = ast_ad.tracer.value_and_grad(f, argnums=(0, 1))(2.0, 3.0)
    agree = np.allclose([y, dx1, dx2], [traced_y, tx1, tx2], rtol=1e-12, atol=0)
    print(f"The runtime tracer agrees: {agree} ({tx1:.12f}, {tx2:.12f})")
    print()
    _, y_dot = ast_ad.jvp(f, (2.0, 3.0), (1.0, 0.0))
    print(f"Forward mode along (1, 0): y_dot = {y_dot:.12f}")
    hessian = ast_ad.hessian(f, argnums=(0, 1))(2.0, 3.0)
    print(
        "The Hessian, forward over reverse:",
        [[round(float(h), 12) for h in row] for row in hessian],
    )


if __name__ == "__main__":
    main()
