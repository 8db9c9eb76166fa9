"""Logistic regression on more data than memory holds: ast_ad's gradient of a plain numpy loss, on
dask.

The data, 40 million rows of 20 features (6.4 GB of float64) by default, is never in memory at once:
dask generates it chunk by chunk each time a graph runs, and the loss and its gradient are
reductions over the chunks. ``ast_ad.value_and_grad`` returns both as dask graphs; one
``dask.compute`` per step runs them together, sharing the work. The script prints the loss at each
step, and at the end its own peak resident memory (``peak_megabytes``), which stays far below the
data's size.

    python examples/dask_regression.py                      # 40M x 20, threads on this machine
    python examples/dask_regression.py --cluster            # the same on a dask.distributed
    LocalCluster python examples/dask_regression.py --rows 20000 --check # small, and checked
    against numpy

Needs ``pip install "ast_ad[dask]"``.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import dask
import dask.array as da
import numpy as np

import ast_ad


def loss(w, b, X, y):
    """The mean negative log-likelihood of logistic regression, in plain numpy."""
    z = X @ w + b
    return np.mean(np.logaddexp(0.0, z) - y * z)


def dataset(rows: int, features: int, chunk: int, seed: int = 0):
    """Features and labels as dask arrays, generated chunk by chunk (the same numbers every
    time)."""
    rng = da.random.default_rng(seed)
    X = rng.standard_normal((rows, features), chunks=(chunk, features))
    truth = np.linspace(-1.0, 1.0, features)
    noise = rng.logistic(size=rows, chunks=chunk)
    y = (X @ truth + 0.5 + noise > 0).astype(float)
    return X, y


def train(
    rows: int, features: int, chunk: int, steps: int, rate: float, check: bool
) -> tuple[np.ndarray, float]:
    X, y = dataset(rows, features, chunk)
    w, b = np.zeros(features), 0.0
    value_and_grad = ast_ad.value_and_grad(loss, argnums=(0, 1))
    if check:  # small data only: the same gradient from numpy arrays in memory
        Xn, yn = dask.compute(X, y)
        lazy_value, lazy_grads = value_and_grad(w, b, X, y)
        value, (w_bar, b_bar) = dask.compute(lazy_value, lazy_grads)
        eager_value, (eager_w, eager_b) = value_and_grad(w, b, Xn, yn)
        assert (
            np.allclose(value, eager_value)
            and np.allclose(w_bar, eager_w)
            and np.isclose(b_bar, eager_b)
        )
        print("gradient on dask = gradient on numpy: True")
    for step in range(steps):
        start = time.perf_counter()
        lazy_value, lazy_grads = value_and_grad(w, b, X, y)  # graphs: nothing has run yet
        # one pass over the data for both
        value, (w_bar, b_bar) = dask.compute(lazy_value, lazy_grads)
        w, b = w - rate * w_bar, b - rate * float(b_bar)
        print(f"step {step + 1}: loss {float(value):.6f} ({time.perf_counter() - start:.1f} s)")
    return w, b


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument(
        "--rows",
        type=int,
        default=40_000_000,
        help="rows of data (8 bytes a feature: the default is 6.4 GB, more than memory holds)",
    )
    parser.add_argument("--features", type=int, default=20, help="features a row")
    parser.add_argument(
        "--chunk", type=int, default=250_000, help="rows per chunk (40 MB at the defaults)"
    )
    parser.add_argument("--steps", type=int, default=3, help="steps of gradient descent")
    parser.add_argument("--rate", type=float, default=2.0, help="the step size")
    parser.add_argument(
        "--cluster", action="store_true", help="run on an in-process dask.distributed LocalCluster"
    )
    parser.add_argument(
        "--check", action="store_true", help="also compare with the gradient on numpy arrays"
    )
    args = parser.parse_args(argv)
    size = args.rows * args.features * 8 / 1e9
    print(
        f"{args.rows:,} rows x {args.features} features: {size:.2f} GB of float64, in chunks of "
        f"{args.chunk:,} rows"
    )
    if args.cluster:
        from dask.distributed import Client, LocalCluster

        with (
            LocalCluster(
                n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
            ) as cluster,
            Client(cluster),
        ):
            print("on a dask.distributed LocalCluster (2 workers, in this process)")
            w, b = train(args.rows, args.features, args.chunk, args.steps, args.rate, args.check)
    else:
        w, b = train(args.rows, args.features, args.chunk, args.steps, args.rate, args.check)
    print("weights:", np.array2string(w, precision=3, max_line_width=100), f"bias: {b:.3f}")
    print(f"peak resident memory: {peak_megabytes():.0f} MB")


def peak_megabytes() -> float:
    """This program's peak resident memory: Linux's ``VmHWM`` of its own image (``getrusage``'s
    ``ru_maxrss`` also counts the process it was started from, a large test runner say, which it
    was a copy of until it ran this), ``getrusage`` elsewhere."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kilobytes
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


if __name__ == "__main__":
    main(sys.argv[1:])
