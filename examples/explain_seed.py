"""The worked example's three artefacts: the computational graph and the two traces."""

import sys

import numpy as np

import ast_ad


def f(x1, x2):
    return np.log(x1) + x1 * x2 - np.sin(x2)


def main() -> None:
    print(ast_ad.explain(f, 2.0, 3.0, argnums=(0, 1)))
    print()
    graph = ast_ad.graph(f, 2.0, 3.0, argnums=(0, 1))
    print(graph.dot)
    if len(sys.argv) > 1:  # python examples/explain_seed.py graph.svg
        print(f"wrote {graph.render(sys.argv[1])}")


if __name__ == "__main__":
    main()
