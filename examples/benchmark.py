"""Time the primal, ast_ad's gradient and autograd's gradient on the same functions, interleaved.

    python examples/benchmark.py [--quick] [gradients | spectral | second-order | compiled |
    checkpointing | solvers | ordinary | nested | nested-compiled | batched | arrays | sequences |
    startup]

(any of those: that table alone; ``startup`` includes the
transform's time against length.)

A checkpointing table times and measures (peak memory by ``tracemalloc``) the gradient of a
10,000-step loop with a 1,000-float state, un-checkpointed and with ``checkpoints=`` 10, 31 and 100,
beside autograd's ``checkpoint`` (which keeps each step's input and recomputes the step's inside).

A second table times forward mode and second derivatives (``jvp``, a Hessian-vector
product, a full Hessian, a Jacobian by both modes) against autograd and, if it is
installed, JAX: eagerly, and under ``jax.jit`` (its compile time reported apart).

For each workload of the first table it prints the time per call (the fastest of batches of the
functions in turn, ``side_by_side``; the other tables take the median of batches) of the plain
function, of ast_ad's gradient and of autograd 1.9.1's gradient (if installed), the ratio of
gradient to primal, the speed-up over autograd, and ast_ad's one-time cost of the first call (parse,
transform, compile; the median of five, caches emptied), and the first call of a new process with an
empty and with a warm persistent cache. autograd needs ``autograd.numpy`` in place of ``numpy``, so
it runs a copy of each function that sees it as ``np``; it cannot differentiate ``math.sin``, so
that row has no autograd column.
"""

from __future__ import annotations

import functools
import math
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import types
import warnings

import numpy as np

try:  # (the solvers' figures: scipy is optional)
    import scipy.integrate as si
    import scipy.optimize as so
except ImportError:  # pragma: no cover
    si = so = None

import ast_ad
import ast_ad.runtime.revolve
from ast_ad import transform

rng = np.random.default_rng(0)
W_RNN, U_RNN = rng.standard_normal((64, 64)) * 0.1, rng.standard_normal((64, 32)) * 0.1
XS_RNN = rng.standard_normal((50, 32))
X_MLP, Y_MLP = rng.standard_normal((128, 784)), rng.standard_normal((128, 10))


def worked(x1, x2):
    return np.log(x1) + x1 * x2 - np.sin(x2)


def loop_math(x):
    for _ in range(100):
        x = x * 0.99 + math.sin(x) * 0.1
    return x


def loop_numpy(x):
    for _ in range(100):
        x = x * 0.99 + np.sin(x) * 0.1
    return x


def element_loop(x):
    y = np.ones(x.shape[0])
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * x[i]
    return np.sum(y)


def element_loop_by_hand(x):
    """The gradient of ``element_loop`` written by hand: the limit (it keeps ``y`` and needs no
    tape)."""
    n = x.shape[0]
    y = np.ones(n)
    for i in range(1, n):
        y[i] = y[i - 1] * x[i]
    y_bar, x_bar = np.ones(n), np.zeros(n)
    for i in range(n - 1, 0, -1):
        x_bar[i] = y_bar[i] * y[i - 1]
        y_bar[i - 1] += y_bar[i] * x[i]
    return np.sum(y), x_bar


def loop_math_by_hand(x):
    """The gradient of ``loop_math`` written by hand: the steps' inputs kept, read back last to
    first."""
    xs = []
    for _ in range(100):
        xs.append(x)
        x = x * 0.99 + math.sin(x) * 0.1
    x_bar = 1.0
    for x_old in reversed(xs):
        x_bar = x_bar * (0.99 + 0.1 * math.cos(x_old))
    return x, x_bar


def rnn_by_hand(W, h):
    """The gradient of ``rnn`` written by hand: the hidden states kept, and the weight's outer
    products as one product of the stacked steps."""
    hs = [h]
    for t in range(50):
        h = np.tanh(W @ h + U_RNN @ XS_RNN[t])
        hs.append(h)
    g = 2.0 * h
    a_bars = []
    for t in range(49, -1, -1):
        a_bar = g * (1.0 - hs[t + 1] ** 2)
        a_bars.append(a_bar)
        g = a_bar @ W
    return np.sum(h ** 2), (np.array(a_bars).T @ np.array(hs[-2::-1]), g)


def element_loop_by_hand_taped(x):
    """The same, written by hand with a tape, as reverse mode must where it cannot keep ``y``: each
    write saves the entry it overwrites, and the backward pass puts it back."""
    n = x.shape[0]
    y = np.ones(n)
    tape = []
    for i in range(1, n):
        tape.append(y[i])
        y[i] = y[i - 1] * x[i]
    total = np.sum(y)
    y_bar, x_bar = np.ones(n), np.zeros(n)
    for i in range(n - 1, 0, -1):
        g = y_bar[i]
        y_bar[i] = 0.0
        y[i] = tape.pop()
        x_bar[i] += g * y[i - 1]
        y_bar[i - 1] += g * x[i]
    return total, x_bar


X_ELEMENTS = 1.0 + rng.standard_normal(3000) * 1e-3
ONES_ELEMENTS = np.ones(3000)


def rnn(W, h):
    for t in range(50):
        h = np.tanh(W @ h + U_RNN @ XS_RNN[t])
    return np.sum(h ** 2)


def mlp(W1, b1, W2, b2):
    hidden = np.tanh(X_MLP @ W1 + b1)
    logits = hidden @ W2 + b2
    return np.mean((logits - Y_MLP) ** 2)


def mlp_by_hand(W1, b1, W2, b2):
    """The gradient of ``mlp`` written by hand, as a numpy backprop is: the layers' products
    transposed."""
    hidden = np.tanh(X_MLP @ W1 + b1)
    residual = hidden @ W2 + b2 - Y_MLP
    logits_bar = residual * (2.0 / residual.size)
    hidden_bar = (logits_bar @ W2.T) * (1.0 - hidden * hidden)
    grads = (
        X_MLP.T @ hidden_bar,
        hidden_bar.sum(axis=0),
        hidden.T @ logits_bar,
        logits_bar.sum(axis=0),
    )
    return np.mean(residual ** 2), grads


def thirty_lines(a, b):
    c = a * b + np.sin(a)
    d = c * c - np.cos(b)
    e = np.exp(-d * 0.1) + a
    f = e / (1.0 + b * b)
    g = np.tanh(f) * c
    h = g + d * e
    i = np.log1p(h * h)
    j = i * a - f
    k = np.sqrt(j * j + 1.0)
    m = k * g + h
    n = np.sin(m) * np.cos(k)
    o = n + m * 0.5
    p = o * o - a
    q = np.exp(-p * p)
    r = q + n * b
    s = r * np.tanh(o)
    t = s - q * k
    u = t * t + 1.0
    v = np.log(u) * c
    w = v + s / u
    y = w * np.sin(v)
    z = y + np.cos(w) * t
    aa = z * z + y
    bb = np.sqrt(aa * aa + 1.0)
    cc = bb - z * 0.3
    dd = cc * np.tanh(bb)
    ee = dd + cc * a
    ff = ee * b - dd
    return ff * ff


A_MAP = rng.standard_normal((100, 100)) * 0.1


def branchy(x, y):
    """Thirty lines over numbers: loops, a while loop, and branches on values (what jax.jit
    refuses)."""
    total = 0.0
    for i in range(20):
        t = x * math.cos(i * 0.3) + y * math.sin(i * 0.2)
        if t > 0.5:
            total = total + t * t
        elif t < -0.5:
            total = total - math.exp(t)
        else:
            total = total + math.sin(t) * y
        if total > 10.0:
            total = total * 0.5
        k = 0
        while k < 3:
            x = x * 0.99 + 0.01 * math.tanh(total)
            k += 1
    scale = 1.0
    for j in range(10):
        step = math.sqrt(1.0 + (total * 0.1) ** 2)
        if step > 1.5 and j % 2 == 0:
            scale = scale * 0.9
            continue
        scale = scale + 0.05 * math.log(step) * y
        if scale > 3.0:
            break
    while total > 1.0:
        total = total * 0.7
    return total * x * scale


def rosenbrock(x):
    """A 100-variable function written as an element loop."""
    total = 0.0
    for i in range(len(x) - 1):
        total = total + (1.0 - x[i]) ** 2 + 10.0 * (x[i + 1] - x[i] ** 2) ** 2
    return total


def map100(x):
    """A function from 100 numbers to 100."""
    y = np.tanh(A_MAP @ x)
    return y * x + np.sin(x)


def simulation(u, steps):
    """The checkpointing workload: a long loop over a state of 1,000 floats."""
    for _ in range(steps):
        u = u + 0.001 * np.sin(u)
    return np.sum(u * u)


def simulation_step(u):
    return u + 0.001 * np.sin(u)


def simulation_10000(u):
    """The same, with its length written out: tangent-ad checkpoints only loops over a constant
    range."""
    for _ in range(10000):
        u = u + 0.001 * np.sin(u)
    return np.sum(u * u)


def checkpointing(repeat: int, steps: int = 10_000) -> None:
    """Time and peak memory of the simulation's gradient, by the number of snapshots; autograd's
    checkpoint."""
    import tracemalloc

    u0 = np.linspace(0.0, 1.0, 1000)
    rows = [("no checkpointing", ast_ad.grad(simulation)), *[
        (f"checkpoints={c}", ast_ad.grad(simulation, checkpoints=c)) for c in (10, 31, 100)],
        # (as many snapshots as fit in 64 MiB: ``ast_ad.runtime.revolve.AUTO_BYTES``)
        ('checkpoints="auto"', ast_ad.grad(simulation, checkpoints="auto"))]
    try:
        import autograd
        import autograd.numpy as anp

        step = autograd.checkpoint(with_namespace(simulation_step, anp))

        def by_steps(u, steps):
            for _ in range(steps):
                u = step(u)
            return anp.sum(u * u)
        rows += [("autograd", autograd.grad(with_namespace(simulation, anp))),
                 ("autograd, checkpoint per step", autograd.grad(by_steps))]
    except ImportError:
        pass
    try:  # tangent-ad, if installed (not a dependency of ast_ad's)
        import tangent

        plain, checkpointed = (
            tangent.grad(simulation_10000),
            tangent.grad(simulation_10000, checkpoint=True),
        )
        rows += [("tangent-ad", lambda u, steps: plain(u)),
                 ("tangent-ad, checkpoint=True", lambda u, steps: checkpointed(u))]
    except ImportError:
        pass
    _table(
        f"{'10,000 steps, 1,000 floats':32} {'gradient':>10} {'/ primal':>9} {'peak memory':>12} "
        f"{'steps run (taped + untaped)':>28}"
    )
    times: dict[str, list[float]] = {name: [] for name, _ in rows}
    primal: list[float] = []
    for _ in range(max(1, repeat // 3)):  # interleaved rounds
        primal.append(median_time(simulation, (u0, steps), 1))
        for name, fn in rows:
            times[name].append(median_time(fn, (u0, steps), 1))
    for name, fn in rows:
        tracemalloc.start()
        fn(u0, steps)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        snapshots = (
            ast_ad.revolve.auto_snapshots(steps, (u0,)) if name.endswith('"auto"')
            else int(name.split("=")[1]) if name.startswith("checkpoints=") else None
        )
        untaped = ast_ad.revolve.forward_steps(steps, snapshots) if snapshots else 0
        run = (
            f"{steps:,} + {untaped:,} ({untaped / steps:.2f} sweeps)"
            if name.startswith(("no", "check"))
            else ""
        )
        best = min(times[name])
        print(
            f"{name:32} {_fmt(best):>10} {best / min(primal):>8.1f}x {peak / 1e6:>10.2f} MB "
            f"{run:>28}"
        )


def second_order_workloads():
    """(name, ast_ad's callable, autograd's (given autograd and the autograd copy), JAX's (given
    jax, jnp copy), the primal, the arguments)."""
    W1, b1 = rng.standard_normal((784, 256)) * 0.05, np.zeros(256)
    W2, b2 = rng.standard_normal((256, 10)) * 0.05, np.zeros(10)
    v1 = rng.standard_normal((784, 256))
    x100 = rng.standard_normal(100) * 0.5
    return [
        ("jvp, 100-step loop, math.sin", loop_math, (0.5,),
         lambda f: lambda x: ast_ad.jvp(f, (x,), (1.0,)), None, None),
        ("jvp, 100-step loop, np.sin", loop_numpy, (0.5,),
         lambda f: lambda x: ast_ad.jvp(f, (x,), (1.0,)), None,
         lambda jax, f: lambda x: jax.jvp(f, (x,), (1.0,))),
        ("jvp, element loop, n = 3000", element_loop, (X_ELEMENTS,),
         lambda f: lambda x: ast_ad.jvp(f, (x,), (ONES_ELEMENTS,)), None, None),
        ("hvp, MLP loss in W1", mlp, (W1, b1, W2, b2),
         lambda f: lambda *a: ast_ad.hvp(f)(*a, v1),
         lambda ag, f: lambda *a: ag.make_hvp(f)(*a)[0](v1),
         lambda jax, f: lambda *a: jax.jvp(lambda w: jax.grad(f)(w, *a[1:]), (a[0],), (v1,))[1]),
        ("Hessian, 100 vars, element loop", rosenbrock, (x100,),
         lambda f: ast_ad.hessian(f), lambda ag, f: ag.hessian(f), lambda jax, f: jax.hessian(f)),
        ("Jacobian 100->100, forward", map100, (x100,),
         lambda f: ast_ad.jacfwd(f), lambda ag, f: ag.jacobian(f), lambda jax, f: jax.jacfwd(f)),
        ("Jacobian 100->100, reverse", map100, (x100,),
         lambda f: ast_ad.jacrev(f), lambda ag, f: ag.jacobian(f), lambda jax, f: jax.jacrev(f)),
    ]


def second_order(repeat: int) -> None:
    try:
        import autograd
    except ImportError:
        autograd = None
    jax, jnp = _jax()
    _table(
        f"{'workload':32} {'primal':>10} {'ast_ad':>10} {'autograd':>10} {'jax':>10} "
        f"{'jax.jit':>10} {'ours/primal':>12} {'jit compile':>12}"
    )
    for name, fn, args, ours_of, autograd_of, jax_of in second_order_workloads():
        ours = ours_of(fn)
        theirs = (
            autograd_of(autograd, with_autograd_numpy(fn)) if autograd and autograd_of else None
        )
        eager = jitted = compile_time = None
        if jax is not None and jax_of is not None:
            eager = jax_of(jax, with_namespace(fn, jnp))
            jitted = jax.jit(eager)
            start = time.perf_counter()
            jax.block_until_ready(jitted(*args))
            compile_time = time.perf_counter() - start
        times: dict[str, list[float]] = {
            "primal": [],
            "ours": [],
            "autograd": [],
            "jax": [],
            "jit": [],
        }
        for _ in range(3):  # interleaved rounds
            times["primal"].append(median_time(fn, args, repeat))
            times["ours"].append(median_time(ours, args, repeat))
            if theirs is not None:
                times["autograd"].append(median_time(theirs, args, max(1, repeat // 3)))
            if eager is not None:
                times["jax"].append(
                    median_time(lambda *a, f=eager: jax.block_until_ready(f(*a)), args, repeat)
                )
                times["jit"].append(
                    median_time(lambda *a, f=jitted: jax.block_until_ready(f(*a)), args, repeat)
                )
        best = {key: (min(value) if value else None) for key, value in times.items()}
        print(
            f"{name:32} {_fmt(best['primal']):>10} {_fmt(best['ours']):>10} "
            f"{_fmt(best['autograd']):>10} {_fmt(best['jax']):>10} {_fmt(best['jit']):>10} "
            f"{best['ours'] / best['primal']:>11.1f}x {_fmt(compile_time):>12}"
        )


def _jax():
    """JAX and jax.numpy with 64-bit floats, or (None, None) where JAX is not installed."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None, None
    jax.config.update("jax_enable_x64", True)
    return jax, jnp


def _table(header: str) -> None:
    print("\n" + header)
    print("-" * len(header))


def with_namespace(fn, namespace):
    """A copy of ``fn`` that sees ``namespace`` (jax.numpy, say) as ``np``, as do the copies of the
    functions of its module that it calls."""
    scope = dict(fn.__globals__, np=namespace)
    for key, value in fn.__globals__.items():
        if isinstance(value, types.FunctionType) and value.__module__ == fn.__module__:
            scope[key] = types.FunctionType(value.__code__, scope, value.__name__,
                                            value.__defaults__)
    return types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__)


def median_time(fn, args, repeat: int) -> float:
    """Median seconds per call, over ``repeat`` batches sized to take about a millisecond."""
    start = time.perf_counter()
    fn(*args)
    once = max(time.perf_counter() - start, 1e-7)
    number = max(1, int(1e-3 / once))
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn(*args)
        times.append((time.perf_counter() - start) / number)
    return statistics.median(times)


def side_by_side(fns, args, rounds: int = 25) -> list[float]:
    """Seconds per call of each of ``fns``: batches of about a millisecond, one of each function in
    turn, the fastest of ``rounds`` (the machine is shared: a burst of other work slows all of a
    round's batches, or some, never speeds one up; the fastest batch is the least disturbed)."""
    numbers = []
    for fn in fns:
        start = time.perf_counter()
        fn(*args)
        numbers.append(max(1, int(1e-3 / max(time.perf_counter() - start, 1e-7))))
    best = [math.inf] * len(fns)
    for _ in range(rounds):
        for k, (fn, number) in enumerate(zip(fns, numbers, strict=True)):
            start = time.perf_counter()
            for _ in range(number):
                fn(*args)
            best[k] = min(best[k], (time.perf_counter() - start) / number)
    return best


def with_autograd_numpy(fn):
    import autograd.numpy as anp
    scope = dict(fn.__globals__, np=anp)
    return types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__)


def first_call_seconds(fn, argnums, args, repeat: int = 5) -> float:
    """Median seconds of a first call (parse, transform, emit, compile, run), the caches emptied
    each time and the persistent cache off (so that the transformation runs)."""
    times = []
    saved = os.environ.get("AST_AD_CACHE")
    os.environ["AST_AD_CACHE"] = "0"
    try:
        for _ in range(repeat):
            transform.forget()
            start = time.perf_counter()
            ast_ad.grad(fn, argnums)(*args)
            times.append(time.perf_counter() - start)
    finally:
        if saved is None:
            del os.environ["AST_AD_CACHE"]
        else:
            os.environ["AST_AD_CACHE"] = saved
    return statistics.median(times)


WARM_START = """
import sys, time
sys.path.insert(0, {folder!r})
import ast_ad
from benchmark import thirty_lines
from ast_ad import transform
start = time.perf_counter()
ast_ad.grad(thirty_lines, (0, 1))(0.3, 0.7)
print(time.perf_counter() - start, transform.counts["fetched"])
"""


def new_process_first_calls(repeat: int = 5) -> tuple[float, float]:
    """Median seconds of the first call in a new process (import not counted): with an empty
    persistent cache, and with the cache that an earlier process left (read back instead of
    transformed)."""
    folder = os.path.dirname(os.path.abspath(__file__))
    script = WARM_START.format(folder=folder)
    cold, warm = [], []
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "AST_AD_CACHE_DIR": cache}
        for _ in range(repeat):  # interleaved: an empty cache, then the one it left
            for kind, times in (("cold", cold), ("warm", warm)):
                if kind == "cold":
                    for path in pathlib.Path(cache).rglob("*"):
                        if path.is_file():
                            path.unlink()
                done = subprocess.run(
                    [sys.executable, "-c", script],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                seconds, fetched = done.stdout.split()
                assert (fetched == "1") == (kind == "warm"), done.stdout
                times.append(float(seconds))
    return statistics.median(cold), statistics.median(warm)


STARTUP = """
import time
import numpy as np
start = time.perf_counter()
import ast_ad
imported = time.perf_counter()

def f(x1, x2):
    return np.log(x1) + x1 * x2 - np.sin(x2)

ast_ad.grad(f, (0, 1))(2.0, 3.0)
print(imported - start, time.perf_counter() - imported)
"""


def startup(repeat: int = 11) -> None:
    """``import ast_ad`` after numpy, and the very first gradient of a process (the worked example):
    medians (and the fastest) of new processes, interleaved, with an empty persistent cache and with
    the one an earlier process left. Python's bytecode cache is on, as for a user
    (``PYTHONDONTWRITEBYTECODE`` unset)."""
    times: dict[str, list[float]] = {"import": [], "cold": [], "warm": []}
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as folder:
        script = pathlib.Path(folder) / "startup.py"
        script.write_text(STARTUP)
        env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        env["AST_AD_CACHE_DIR"] = cache
        for _ in range(repeat):
            for kind in ("cold", "warm"):
                if kind == "cold":
                    for path in pathlib.Path(cache).rglob("*"):
                        if path.is_file():
                            path.unlink()
                done = subprocess.run(
                    [sys.executable, str(script)],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                imported, first = (float(part) for part in done.stdout.split())
                times["import"].append(imported)
                times[kind].append(first)
    def shown(key: str) -> str:
        return f"{_fmt(statistics.median(times[key]))} (fastest {_fmt(min(times[key]))})"

    print(f"\nstart-up, medians of {repeat} new processes each, interleaved:")
    print(f"  import ast_ad after numpy: {shown('import')}")
    print(f"  the very first gradient (worked example): {shown('cold')} with an empty cache, "
          f"{shown('warm')} with the cache an earlier process left")


def straight_line_source(lines: int) -> str:
    """A function of ``lines`` statements, each two or three primitives on the two before it."""
    body = ["import numpy as np", "", "def f(x, y):", "    v0 = x * y", "    v1 = np.sin(v0)"]
    forms = [
        "{p} * {q} + x",
        "np.tanh({p}) - {q}",
        "np.exp(-{p} * {p}) * y",
        "{p} / (1.0 + {q} * {q})",
    ]
    for k in range(2, lines):
        body.append(f"    v{k} = " + forms[k % 4].format(p=f"v{k - 1}", q=f"v{k - 2}"))
    return "\n".join([*body, f"    return v{lines - 1}", ""])


def transform_times(lengths=(100, 300, 1000), repeat: int = 3) -> None:
    """The first call (parse, transform, emit, compile, run) of straight-line functions of growing
    length."""
    import importlib.util

    print("\nfirst call of a straight-line function (median of 3, persistent cache off):")
    with tempfile.TemporaryDirectory() as folder:
        for lines in lengths:
            path = pathlib.Path(folder) / f"straight_{lines}.py"
            path.write_text(straight_line_source(lines))
            spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            seconds = first_call_seconds(module.f, (0, 1), (0.3, 0.7), repeat)
            print(
                f"  {lines:5} statements: {_fmt(seconds)}, {seconds / lines * 1e3:.2f} ms a "
                "statement"
            )


def workloads():
    W1, b1 = rng.standard_normal((784, 256)) * 0.05, np.zeros(256)
    W2, b2 = rng.standard_normal((256, 10)) * 0.05, np.zeros(10)
    return [
        ("worked example (scalars)", worked, (0, 1), (2.0, 3.0), True),
        ("100-step loop, math.sin", loop_math, (0,), (0.5,), False),
        ("100-step loop, np.sin", loop_numpy, (0,), (0.5,), True),
        ("RNN, 50 steps, 64 units", rnn, (0, 1), (W_RNN, np.zeros(64)), True),
        ("MLP 784-256-10, batch 128", mlp, (0, 1, 2, 3), (W1, b1, W2, b2), True),
        ("element loop y[i] = y[i-1] * x[i], n = 3000", element_loop, (0,), (X_ELEMENTS,), False),
    ]


def main(repeat: int) -> None:
    gradients(repeat)
    ordinary(repeat)
    spectral(repeat)
    startup()
    transform_times()
    second_order(repeat)
    compiled(repeat)
    checkpointing(repeat)


def gradients(repeat: int) -> None:
    """The first table: gradients against their primals, autograd's and tangent-ad's, and the first
    calls; then the gradients written by hand, timed beside their primals and ast_ad's."""
    try:
        import autograd
    except ImportError:
        autograd = None
    very_first = first_call_seconds(worked, (0, 1), (2.0, 3.0), repeat=1)
    header = f"{'workload':28} {'primal':>10} {'ast_ad':>10} {'autograd':>10} {'tangent-ad':>10} " \
             f"{'grad/primal':>12} {'vs autograd':>12} {'vs tangent':>11} {'first call':>11}"
    print(header)
    print("-" * len(header))
    for name, fn, argnums, args, has_autograd in workloads():
        first = first_call_seconds(fn, argnums, args)
        ours = ast_ad.grad(fn, argnums)
        theirs = (
            autograd.grad(with_autograd_numpy(fn), argnums) if autograd and has_autograd else None
        )
        tangents = tangent_grad(fn, argnums)
        p, o = side_by_side([fn, ours], args, rounds=3 * repeat + 4)
        t = side_by_side([theirs], args, rounds=repeat)[0] if theirs is not None else None
        tg = side_by_side([tangents], args, rounds=repeat)[0] if tangents is not None else None
        print(
            f"{name:28} {_fmt(p):>10} {_fmt(o):>10} {_fmt(t):>10} {_fmt(tg):>10} {o / p:>11.1f}x "
            f"{(f'{t / o:.0f}x faster' if t else 'n/a'):>12} "
            f"{(f'{tg / o:.0f}x faster' if tg else 'n/a'):>11} {_fmt(first):>11}"
        )
    print(
        "  (tangent-ad 0.4.0 has no rule for math.sin, and reads no x.shape: its element loop is "
        "written with len(x))"
    )
    mlp_args = workloads()[4][3]
    for name, fn, by_hand, argnums, args in (
            ("element loop", element_loop, element_loop_by_hand, (0,), (X_ELEMENTS,)),
            ("100-step loop, math.sin", loop_math, loop_math_by_hand, (0,), (0.5,)),
            ("RNN, 50 steps, 64 units", rnn, rnn_by_hand, (0, 1), (W_RNN, np.zeros(64))),
            ("MLP 784-256-10, batch 128", mlp, mlp_by_hand, (0, 1, 2, 3), mlp_args)):
        primal, ours, hand = side_by_side(
            [fn, ast_ad.grad(fn, argnums), by_hand], args, rounds=3 * repeat + 4
        )
        print(
            f"  {name}, its gradient written by hand: {_fmt(hand)}, {hand / primal:.1f}x its "
            "primal "
            f"{_fmt(primal)} (ast_ad beside it: {ours / primal:.1f}x)"
        )
    jax_beside(repeat)
    peaks = element_loop_memory()
    print(
        "  peak memory of the element loop's gradient (tracemalloc), n = 3,000 and 12,000: "
        + "; ".join(
            f"{name} {small / 1e3:.0f} / {large / 1e3:.0f} kB"
            for name, (small, large) in peaks.items()
        )
    )
    first = first_call_seconds(thirty_lines, (0, 1), (0.3, 0.7))
    print(f"\nfirst call (transform + compile) of a 30-line function: {_fmt(first)} (median of 5)")
    print(
        "the process's very first gradient call, which also reads the rule tables: "
        f"{_fmt(very_first)}"
    )
    cold, warm = new_process_first_calls()
    print(
        f"first call of that 30-line function in a new process: {_fmt(cold)} with an empty cache, "
        f"{_fmt(warm)} with the cache an earlier process left (median of 5)"
    )


def element_loop_len(x):
    """``element_loop`` with its length read by ``len``: tangent-ad differentiates no
    ``x.shape``."""
    n = len(x)
    y = np.ones(n)
    for i in range(1, n):
        y[i] = y[i - 1] * x[i]
    return np.sum(y)


def tangent_grad(fn, argnums):
    """tangent-ad's gradient of ``fn`` (of ``element_loop_len`` for ``element_loop``), or ``None``
    where it is not installed or cannot differentiate the function (not a dependency of
    ast_ad's)."""
    try:
        import tangent
    except ImportError:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return tangent.grad(
                element_loop_len if fn is element_loop else fn, wrt=argnums, verbose=0
            )
    except Exception:  # noqa: BLE001 (its own errors: no rule for math.sin, say)
        return None


def jax_beside(repeat: int) -> None:
    """JAX on the first table's workloads: ``jax.grad`` eagerly and under ``jax.jit`` (its compile
    apart), beside ast_ad's gradient, side by side. JAX traces no ``math.sin`` and writes no items:
    those rows are left out."""
    jax, jnp = _jax()
    if jax is None:
        return
    print(
        f"\n{'JAX (64-bit floats)':28} {'ast_ad':>10} {'jax.grad':>10} {'jax.jit':>10} "
        f"{'compile':>10} {'ast_ad vs jax.jit':>18}"
    )
    for name, fn, argnums, args, _ in workloads():
        if fn in (loop_math, element_loop):
            continue
        theirs = jax.grad(with_namespace(fn, jnp), argnums)
        jitted = jax.jit(theirs)
        start = time.perf_counter()
        jax.block_until_ready(jitted(*args))
        compile_seconds = time.perf_counter() - start
        ours = ast_ad.grad(fn, argnums)
        o, e, j = side_by_side(
            [
                ours,
                lambda *a, f=theirs: jax.block_until_ready(f(*a)),
                lambda *a, f=jitted: jax.block_until_ready(f(*a)),
            ],
            args,
            rounds=repeat,
        )
        ratio = f"{j / o:.1f}x faster" if j > o else f"{o / j:.1f}x slower"
        print(
            f"{name[:28]:28} {_fmt(o):>10} {_fmt(e):>10} {_fmt(j):>10} "
            f"{compile_seconds * 1e3:>7.0f} ms {ratio:>18}"
        )


def power_spectrum(x):
    """The power of a signal's spectrum (issue 42's benchmark)."""
    return np.sum(np.abs(np.fft.rfft(x)) ** 2)


def low_pass(x, h):
    """The energy of a signal passed through a filter ``h`` of its spectrum."""
    return np.sum(np.fft.irfft(np.fft.rfft(x) * h, n=len(x)) ** 2)


def spectral(repeat: int) -> None:
    """Gradients through np.fft at n = 2^16: the primal, ast_ad's gradient, autograd's, and JAX's
    (eager and under jax.jit, compile apart), side by side."""
    try:
        import autograd
    except ImportError:
        autograd = None
    jax, jnp = _jax()
    n = 2**16
    signal = rng.standard_normal(n)
    response = np.exp(-np.arange(n // 2 + 1) / 500.0)
    header = (
        f"{'np.fft, n = 2^16':28} {'primal':>10} {'ast_ad':>10} {'autograd':>10} "
        f"{'jax.jit':>10} {'grad/primal':>12} {'vs jax.jit':>12}"
    )
    _table(header)
    for name, fn, argnums, args in (
        ("power spectrum", power_spectrum, (0,), (signal,)),
        ("low-pass filter (x and h)", low_pass, (0, 1), (signal, response)),
    ):
        fns = [fn, ast_ad.grad(fn, argnums)]
        if autograd is not None:
            fns.append(autograd.grad(with_autograd_numpy(fn), argnums))
        jitted = None
        if jax is not None:
            jitted = jax.jit(jax.grad(with_namespace(fn, jnp), argnums))
            jax.block_until_ready(jitted(*args))
            fns.append(lambda *a, f=jitted: jax.block_until_ready(f(*a)))
        times = side_by_side(fns, args, rounds=repeat + 2)
        p, o = times[0], times[1]
        t = times[2] if autograd is not None else None
        j = times[-1] if jitted is not None else None
        versus = "n/a" if j is None else f"{j / o:.1f}x faster" if j > o else f"{o / j:.1f}x slower"
        print(
            f"{name:28} {_fmt(p):>10} {_fmt(o):>10} {_fmt(t):>10} {_fmt(j):>10} "
            f"{o / p:>11.1f}x {versus:>12}"
        )


def element_loop_memory() -> dict[str, tuple[int, int]]:
    """Peak memory (bytes, by ``tracemalloc``) of the element loop's gradient at 3,000 and 12,000
    entries: ast_ad's, the hand-written one with a tape, and the hand-written one that keeps ``y``
    (no tape): linear in the steps."""
    import tracemalloc

    ours = ast_ad.grad(element_loop)
    found: dict[str, tuple[int, int]] = {}
    for name, fn in (("ast_ad", ours), ("by hand, taped", element_loop_by_hand_taped),
                     ("by hand, no tape", element_loop_by_hand)):
        peaks = []
        for n in (3000, 12000):
            x = 1.0 + rng.standard_normal(n) * 1e-3
            fn(x)  # transformed and compiled before measuring
            tracemalloc.start()
            fn(x)
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
        found[name] = (peaks[0], peaks[1])
    return found


def compiled(repeat: int) -> None:
    """ast_ad's gradient compiled by Numba (jit="numba") against the interpreted one and
    jax.jit(jax.grad).

    JAX runs copies with math and numpy as jax.numpy (the math.sin row: the np.sin loop); jax.jit
    refuses Python branches on traced values, so that row times jax.grad eagerly; JAX has no item
    assignment.
    """
    try:
        import numba
    except ImportError:
        print("\n(numba is not installed: pip install \"ast_ad[numba]\" for the compiled table)")
        return
    jax, jnp = _jax()
    _table(
        f"{'compiled gradients':32} {'primal':>10} {'njit primal':>11} {'ast_ad':>10} "
        f"{'jit=numba':>10} {'compile':>8} {'jax.jit(grad)':>16} {'compile':>8} {'vs JAX':>13}"
    )
    rows = [("100-step loop, math.sin", loop_math, (0,), (0.5,), loop_numpy),
            ("100-step loop, np.sin", loop_numpy, (0,), (0.5,), loop_numpy),
            ("loops and branches (scalars)", branchy, (0, 1), (0.3, 0.7), branchy),
            ("element loop, n = 3000", element_loop, (0,), (X_ELEMENTS,), None)]
    for name, fn, argnums, args, jax_fn in rows:
        ours = ast_ad.grad(fn, argnums)
        fast = ast_ad.grad(fn, argnums, jit="numba")
        start = time.perf_counter()
        fast(*args)
        compile_ours = time.perf_counter() - start
        primal_jit = numba.njit(fn)
        primal_jit(*args)
        theirs = compile_jax = None
        eager = False
        if jax is not None and jax_fn is not None:
            scope = dict(jax_fn.__globals__, np=jnp, math=jnp)
            theirs = jax.grad(types.FunctionType(jax_fn.__code__, scope, jax_fn.__name__), argnums)
            try:
                jitted = jax.jit(theirs)
                start = time.perf_counter()
                jax.block_until_ready(jitted(*args))
                compile_jax = time.perf_counter() - start
                theirs = jitted
            # a Python branch on a traced value: jax.grad runs it eagerly
            except jax.errors.JAXTypeError:
                eager = True
        times: dict[str, list[float]] = {
            "primal": [],
            "njit": [],
            "ours": [],
            "fast": [],
            "jax": [],
        }
        for _ in range(3):  # interleaved rounds
            times["primal"].append(median_time(fn, args, repeat))
            times["njit"].append(median_time(primal_jit, args, repeat))
            times["ours"].append(median_time(ours, args, repeat))
            times["fast"].append(median_time(fast, args, repeat))
            if theirs is not None:
                times["jax"].append(
                    median_time(
                        lambda *a, f=theirs: jax.block_until_ready(f(*a)),
                        args,
                        1 if eager else repeat,
                    )
                )
        best = {key: (min(value) if value else None) for key, value in times.items()}
        jax_time = (_fmt(best["jax"]) + (" eager" if eager else "")) if best["jax"] else "n/a"
        versus = f"{best['jax'] / best['fast']:,.0f}x faster" if best["jax"] else "n/a"
        print(
            f"{name:32} {_fmt(best['primal']):>10} {_fmt(best['njit']):>11} "
            f"{_fmt(best['ours']):>10} {_fmt(best['fast']):>10} {compile_ours:>7.2f}s "
            f"{jax_time:>16} {(f'{compile_jax:.2f}s' if compile_jax else ''):>8} {versus:>13}"
        )


def chain(z, p):
    """A thousand unknowns, each tied to its neighbour."""
    return z + 0.1 * np.tanh(np.roll(z, 1)) - p


def chain_root(scale):
    sol = so.root(chain, np.zeros(1000), args=(scale * np.linspace(0.5, 1.5, 1000),), tol=1e-12)
    return np.sum(sol.x ** 2)


def relaxation(t, y, k):
    """A hundred states relaxing at their own rates, each pushed by its neighbour."""
    return -k * y + 0.1 * np.sin(np.roll(y, 1))


def relaxed(k, horizon=10.0):
    sol = si.solve_ivp(relaxation, (0.0, horizon), np.ones(100), args=(k,),
                       t_eval=np.linspace(horizon / 10.0, horizon, 10), rtol=1e-8, atol=1e-10)
    return np.sum(sol.y[:, -1] ** 2)


def solvers(repeat: int) -> None:
    """Derivatives through scipy's solvers (``ast_ad.api.solvers``): the backward pass through
    ``root`` on a 1,000-unknown system, and through ``solve_ivp`` on a 100-state ODE, each in units
    of the call it differentiates, side by side; and the adjoint method's peak memory at two
    horizons (ten times the steps)."""
    import tracemalloc

    from ast_ad.api import solvers as rules

    gradient = ast_ad.grad(chain_root)
    gradient(1.0)
    products = {"n": 0}
    matvec, rmatvec = rules.Products.matvec, rules.Products.rmatvec

    def counted(method):
        def count(self, v):
            products["n"] += 1
            return method(self, v)
        return count
    rules.Products.matvec, rules.Products.rmatvec = counted(matvec), counted(rmatvec)
    gradient(1.0)
    rules.Products.matvec, rules.Products.rmatvec = matvec, rmatvec
    # the backward pass alone, timed as the rule the gradient calls (the gradient less the solve
    # would be below the solve's own noise)
    line = np.linspace(0.5, 1.5, 1000)
    sol = so.root(chain, np.zeros(1000), args=(line,), tol=1e-12)

    def backward(scale):
        return rules.result_root_vjp({"x": 2.0 * sol.x}, sol, chain, (scale * line,), "x", 1e-12)

    primal, ours, back = side_by_side([chain_root, gradient, backward], (1.0,), rounds=5)
    print(f"root, 1,000 unknowns:     solve {_fmt(primal)}, gradient {_fmt(ours)}: its backward "
          f"pass {_fmt(back)} ({back / primal:.3f}x the solve; "
          f"{products['n']} products of dF/dz, each a jvp or vjp of F, in GMRES and the check; "
          "finite differences in a vector of 1,000 parameters would take 1,000 more solves)")
    k = np.linspace(0.5, 2.0, 100)
    ode = ast_ad.grad(relaxed)
    ode(k)
    primal, ours = side_by_side([relaxed, ode], (k,), rounds=3)
    print(f"solve_ivp, 100 states:    solve {_fmt(primal)}, gradient {_fmt(ours)} "
          f"({ours / primal:.1f}x the solve, by the adjoint method)")
    peaks, calls = [], []
    for horizon in (10.0, 100.0, 1000.0):
        sol = si.solve_ivp(relaxation, (0.0, horizon), np.ones(100), args=(k,),
                           t_eval=np.linspace(horizon / 10.0, horizon, 10), rtol=1e-8, atol=1e-10)
        calls.append(sol.nfev)
        tracemalloc.start()
        ast_ad.grad(relaxed)(k, horizon)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    spans = zip(peaks, (10, 100, 1000), calls, strict=True)
    print("adjoint peak memory:      " + ", ".join(
        f"{peak / 1e6:.1f} MB over t in [0, {horizon}] ({count:,} calls of the right-hand side in "
        "the solve)" for peak, horizon, count in spans))


def rnn_dot(w, u, xs):
    """The RNN as people often write it (issue 41): ``np.dot``, every array an argument, the state
    made inside."""
    h = np.zeros(64)
    for t in range(50):
        h = np.tanh(np.dot(w, h) + np.dot(u, xs[t]))
    return np.sum(h * h)


def rnn_dot_by_hand(w, u, xs):
    """Its gradient written by hand: the states kept, each weight's outer products summed as one
    product of the stacked steps."""
    h = np.zeros(64)
    hs = [h]
    for t in range(50):
        h = np.tanh(np.dot(w, h) + np.dot(u, xs[t]))
        hs.append(h)
    g = 2.0 * h
    a_bars = []
    for t in range(49, -1, -1):
        a_bar = g * (1.0 - hs[t + 1] * hs[t + 1])
        a_bars.append(a_bar)
        g = a_bar @ w
    stacked = np.array(a_bars).T
    return np.sum(h * h), (stacked @ np.array(hs[-2::-1]), stacked @ xs[::-1])


def leapfrog(x, v, k, dt, steps):
    """A leapfrog simulation of springs (issue 41), as written from a textbook."""
    for _ in range(steps):
        a = -k * x
        v = v + 0.5 * dt * a
        x = x + dt * v
        a = -k * x
        v = v + 0.5 * dt * a
    return np.sum(x * x) + np.sum(v * v)


def leapfrog_by_hand(x, v, k, dt, steps):
    """Its gradient in ``x``, ``v`` and ``k`` written by hand: the positions kept, the velocities
    not (the backward pass reads none)."""
    c = 0.5 * dt
    xs = []
    for _ in range(steps):
        v = v - c * k * x
        xs.append(x)
        x = x + dt * v
        v = v - c * k * x
    out = np.sum(x * x) + np.sum(v * v)
    x_bar, v_bar, k_bar = 2.0 * x, 2.0 * v, 0.0
    for x_old in reversed(xs):
        k_bar -= c * np.dot(v_bar, x)
        x_bar = x_bar - c * k * v_bar
        v_bar = v_bar + dt * x_bar
        x = x_old
        k_bar -= c * np.dot(v_bar, x)
        x_bar = x_bar - c * k * v_bar
    return out, (x_bar, v_bar, k_bar)


def ordinary(repeat: int) -> None:
    """Code written as people write it (issue 41), beside gradients written by hand: the RNN with
    ``np.dot`` and its arrays as arguments, the leapfrog simulation with and without checkpoints."""
    xs = rng.standard_normal((50, 32))
    state = rng.standard_normal(1000), rng.standard_normal(1000)
    cases = [
        ("RNN with np.dot, weights as arguments", rnn_dot, rnn_dot_by_hand, (0, 1),
         (W_RNN, U_RNN, xs), None),
        ("leapfrog, 1,000 springs, 200 steps", leapfrog, leapfrog_by_hand, (0, 1, 2),
         (*state, 0.7, 0.01, 200), None),
        ("  the same, checkpointed (10 snapshots)", leapfrog, leapfrog_by_hand, (0, 1, 2),
         (*state, 0.7, 0.01, 200), 10),
    ]
    print("\ncode as people write it, against its gradient written by hand")
    for name, fn, by_hand, argnums, args, snapshots in cases:
        ours = ast_ad.grad(fn, argnums, checkpoints=snapshots)
        for a, b in zip(ours(*args), by_hand(*args)[1], strict=True):
            assert np.allclose(a, b), name  # the same gradient
        primal, mine, hand = side_by_side([fn, ours, by_hand], args, rounds=3 * repeat + 4)
        print(f"  {name}: primal {_fmt(primal)}, ast_ad {mine / primal:.2f}x it, by hand "
              f"{hand / primal:.2f}x (ast_ad / by hand: {mine / hand:.2f})")


def chained(x):
    """An element loop from 100 numbers to 100: each entry from the one before (issue 40's dense
    Jacobian of a loop)."""
    y = np.zeros(x.size)
    y[0] = x[0]
    for i in range(1, x.size):
        y[i] = 0.5 * y[i - 1] * np.sin(x[i]) + x[i - 1] ** 2
    return y


def chained_jacobian_by_hand(x):
    """The Jacobian of ``chained`` as one batched pass written by hand: each row from the one
    before."""
    n = x.size
    y, jac = np.zeros(n), np.zeros((n, n))
    y[0], jac[0, 0] = x[0], 1.0
    for i in range(1, n):
        s = np.sin(x[i])
        y[i] = 0.5 * y[i - 1] * s + x[i - 1] ** 2
        jac[i] = 0.5 * s * jac[i - 1]
        jac[i, i] += 0.5 * y[i - 1] * np.cos(x[i])
        jac[i, i - 1] += 2.0 * x[i - 1]
    return jac


X_LOGISTIC = rng.standard_normal((1000, 200))
T_LOGISTIC = (rng.random(1000) > 0.5) * 1.0


def banded(x):
    """A tridiagonal map of n numbers to n (issue 40's banded Jacobian)."""
    y = x ** 2
    y[1:] = y[1:] - x[:-1] * 3.0
    y[:-1] = y[:-1] + np.sin(x[1:])
    return y


def arrow(x):
    """A row of every entry beside a diagonal: a sparse Jacobian whose columns take one colour
    each, and its rows two (``sparse=True`` reads it by rows)."""
    y = x * x
    y[0] = np.sum(np.sin(x))
    return y


def extended_rosenbrock(x):
    """The extended Rosenbrock function of n variables, written with slices."""
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def logistic_loss(w):
    """A 200-parameter logistic loss over 1,000 samples, with a ridge term."""
    z = X_LOGISTIC @ w
    return np.sum(np.logaddexp(0.0, z) - T_LOGISTIC * z) / 1000 + 0.01 * np.sum(w * w)


def logistic_hessian_by_hand(w):
    """Its Hessian written by hand: ``X^T diag(s (1 - s)) X / n`` plus the ridge's."""
    s = 1.0 / (1.0 + np.exp(-(X_LOGISTIC @ w)))
    return X_LOGISTIC.T @ (X_LOGISTIC * (s * (1.0 - s))[:, None]) / 1000 + 0.02 * np.eye(w.size)


def batched(repeat: int) -> None:
    """Jacobians and Hessians from one batched pass (issue 40), beside one pass a column (what
    ``jacfwd`` and ``hessian`` did before) and the same written by hand: a dense Jacobian of an
    element loop, the Hessian of a logistic loss (against its gradient), and GradBench's ``ba`` and
    ``ht`` Jacobians on generated problems (against their objectives)."""
    from ast_ad.api import lowering

    def one_pass_a_column(fn, *args):
        saved = lowering.batched_columns

        def refused(*_):
            raise lowering.BatchRefused("one pass a column, for the comparison")
        lowering.batched_columns = refused
        try:
            return fn(*args)
        finally:
            lowering.batched_columns = saved

    def on_batches(fn, *args):
        """The same one pass, by the code for one tangent on ``Batch``es (no code written for
        stacks): what ``jacfwd`` and ``hessian`` ran before ``modes.batch``."""
        saved = lowering.stacked_code
        lowering.stacked_code = lambda *_: None
        try:
            return fn(*args)
        finally:
            lowering.stacked_code = saved

    x100, w200 = rng.standard_normal(100) * 0.5, rng.standard_normal(200) * 0.1
    jac, hess = ast_ad.jacfwd(chained), ast_ad.hessian(logistic_loss)
    assert np.allclose(jac(x100), chained_jacobian_by_hand(x100))
    assert np.allclose(hess(w200), logistic_hessian_by_hand(w200))
    assert lowering.stacked_code(lowering.lower(chained, (x100,)), (0,)) is not None
    rounds = max(2, repeat // 2)
    print("\nJacobians and Hessians in one batched pass (the code written for stacks), against "
          "the same pass on Batches, one pass a column, and by hand:")
    # (a millisecond a call: more rounds, the fastest of which is the least disturbed)
    primal, ours, batches, columns, hand = side_by_side(
        [chained, jac, lambda x: on_batches(jac, x), lambda x: one_pass_a_column(jac, x),
         chained_jacobian_by_hand], (x100,), rounds=4 * rounds)
    print(f"  Jacobian 100 -> 100 of an element loop: function {_fmt(primal)}; jacfwd "
          f"{ours / primal:.1f}x it, on Batches {batches / primal:.0f}x, one pass a column "
          f"{columns / primal:.0f}x, by hand {hand / primal:.1f}x")
    gradient = ast_ad.grad(logistic_loss)
    grad_time, ours, batches, columns, hand = side_by_side(
        [gradient, hess, lambda w: on_batches(hess, w), lambda w: one_pass_a_column(hess, w),
         logistic_hessian_by_hand], (w200,), rounds=rounds)
    print(f"  Hessian of a logistic loss, 200 parameters: gradient {_fmt(grad_time)}; hessian "
          f"{ours / grad_time:.1f}x it, on Batches {batches / grad_time:.0f}x, one pass a column "
          f"{columns / grad_time:.0f}x, by hand {hand / grad_time:.0f}x")
    sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "benchmarks" / "gradbench"))
    from ast_ad_gradbench import ba, ht
    problem = ba.Problem({"n": 20, "m": 2000, "p": 20000, "cam": [0.1, -0.2, 0.3, 1.0, 2.0, 3.0,
                          400.0, 5.0, -8.0, 0.08, 0.002], "x": [7.2, 0.4, 3.0], "w": 0.41,
                          "feat": [271.7, 834.2]})
    problem.cams += rng.normal(size=problem.cams.shape) * 0.01
    problem.X += rng.normal(size=problem.X.shape) * 0.01

    def fifteen_passes(problem):
        cams, X, w, feats = problem.inputs()
        columns = []
        for k in range(ba.CAMERA + 4):
            moved = [np.zeros_like(cams), np.zeros_like(X), np.zeros_like(w)]
            if k < ba.CAMERA:
                moved[0][:, k] = 1.0
            elif k < ba.CAMERA + 3:
                moved[1][:, k - ba.CAMERA] = 1.0
            else:
                moved[2][:] = 1.0
            columns.append(ast_ad.jvp(ba.reproj_err, (cams, X, w, feats), (*moved, None))[1])
        return np.stack(columns, axis=2)
    assert np.allclose(ba.blocks(problem)[0], fifteen_passes(problem))
    assert np.allclose(ba.blocks_by_columns(problem)[0], fifteen_passes(problem))
    objective, by_rows, ours, batches, columns = side_by_side(
        [ba.objective, ba.blocks, ba.blocks_by_columns,
         lambda p: on_batches(ba.blocks_by_columns, p), fifteen_passes], (problem,),
        rounds=2 * rounds)
    print(f"  GradBench ba, p = 20,000 observations: objective {_fmt(objective)}; its blocks by "
          f"two backward passes (the tool's) {by_rows / objective:.1f}x it; its 15 columns in one "
          f"batched jvp {ours / objective:.0f}x, on Batches {batches / objective:.0f}x, 15 jvps "
          f"{columns / objective:.0f}x")
    x10k = np.linspace(-1.0, 1.5, 10_000)
    sparse_jac = ast_ad.jacobian(banded, sparse=True)
    sparse_hess = ast_ad.hessian(extended_rosenbrock, sparse=True)
    rosen_grad = ast_ad.grad(extended_rosenbrock)
    assert np.array_equal(sparse_jac(x10k[:50]).toarray(), ast_ad.jacfwd(banded)(x10k[:50]))
    assert np.allclose(sparse_hess(x10k[:50]).toarray(),
                       ast_ad.hessian(extended_rosenbrock)(x10k[:50]))
    primal, ours = side_by_side([banded, sparse_jac], (x10k,), rounds=rounds)
    start = time.perf_counter()
    found = ast_ad.sparsity(banded)(x10k)
    pattern_time = time.perf_counter() - start
    print(f"  banded Jacobian, n = 10,000, sparse=True: function {_fmt(primal)}; Jacobian "
          f"{ours / primal:.0f}x it ({found.nnz} entries; its pattern, found once and kept, "
          f"{_fmt(pattern_time)})")
    sparse_arrow = ast_ad.jacobian(arrow, sparse=True)
    assert np.array_equal(sparse_arrow(x10k[:50]).toarray(), ast_ad.jacfwd(arrow)(x10k[:50]))
    primal, ours = side_by_side([arrow, sparse_arrow], (x10k,), rounds=rounds)
    print(f"  arrow-shaped Jacobian (a full row beside the diagonal), n = 10,000, sparse=True: "
          f"function {_fmt(primal)}; Jacobian {ours / primal:.0f}x it (by rows: two colours, "
          f"where its columns take 10,000)")
    grad_time, ours = side_by_side([rosen_grad, sparse_hess], (x10k,), rounds=rounds)
    print(f"  extended Rosenbrock Hessian, n = 10,000, sparse=True: gradient {_fmt(grad_time)}; "
          f"Hessian {ours / grad_time:.0f}x it")
    hand_problem = ht.Problem(ht.random_input(rng, 10_000, complicated=True))
    objective, ours, batches, columns = side_by_side(
        [ht.objective, ht.jacobian, lambda p: on_batches(ht.jacobian, p),
         lambda p: one_pass_a_column(ht.jacobian, p)], (hand_problem,), rounds=rounds)
    print(f"  GradBench ht (complicated), 10,000 points, a generated hand of 12 vertices: "
          f"objective {_fmt(objective)}; Jacobian {ours / objective:.0f}x it, on Batches "
          f"{batches / objective:.0f}x, one pass a column {columns / objective:.0f}x")


def _gradbench():
    """The GradBench tool's modules (``benchmarks/gradbench``), whose ``particle`` and ``saddle``
    are these workloads."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "benchmarks"
                           / "gradbench"))
    from ast_ad_gradbench import particle, saddle, solver

    return particle, saddle, solver


def particle_force_by_hand(x, w):
    """Minus the gradient of ``particle.potential`` at ``x``, and its derivatives in ``x`` (a
    symmetric 2 x 2 matrix) and in ``w``, written by hand: a unit charge at ``c`` pushes with ``d /
    |d|^3``, ``d = x - c``."""
    force, jacobian, by_w = np.zeros(2), np.zeros((2, 2)), np.zeros(2)
    for k, c in enumerate((np.array([10.0, 10.0 - w]), np.array([10.0, 0.0]))):
        d = x - c
        r2 = d @ d
        r3 = r2 * np.sqrt(r2)
        force += d / r3
        block = np.eye(2) / r3 - 3.0 * np.outer(d, d) / (r3 * r2)
        jacobian += block
        if k == 0:
            by_w += block[:, 1]  # d moves by (0, 1) as w does
    return force, jacobian, by_w


def particle_miss_by_hand(w):
    """``particle.miss`` with its force by hand."""
    x, xdot = np.array([0.0, 8.0]), np.array([0.75, 0.0])
    while True:
        xddot = particle_force_by_hand(x, w[0])[0]
        x_new = x + 0.1 * xdot
        if x_new[1] <= 0.0:
            break
        x, xdot = x_new, xdot + 0.1 * xddot
    t_f = -x[1] / xdot[1]
    return (x[0] + t_f * xdot[0]) ** 2


def particle_gradient_by_hand(w):
    """The gradient of ``particle_miss_by_hand`` in ``w``, by hand: the path kept, then its adjoint
    stepped back (each step's force derivatives from ``particle_force_by_hand``)."""
    x, xdot = np.array([0.0, 8.0]), np.array([0.75, 0.0])
    steps = []
    while True:
        force, jacobian, by_w = particle_force_by_hand(x, w[0])
        x_new = x + 0.1 * xdot
        if x_new[1] <= 0.0:
            break
        steps.append((jacobian, by_w))
        x, xdot = x_new, xdot + 0.1 * force
    t_f = -x[1] / xdot[1]
    u = x[0] + t_f * xdot[0]
    x_bar = np.array([2.0 * u, -2.0 * u * xdot[0] / xdot[1]])
    xdot_bar = np.array([2.0 * u * t_f, 2.0 * u * xdot[0] * x[1] / xdot[1] ** 2])
    w_bar = 0.0
    for jacobian, by_w in reversed(steps):
        w_bar += 0.1 * (by_w @ xdot_bar)
        x_bar, xdot_bar = x_bar + 0.1 * (jacobian @ xdot_bar), xdot_bar + 0.1 * x_bar
    return np.array([w_bar])


def two_vector(x):
    """A function of a 2-vector (issue 40: the call of a derivative object against the function
    and against the generated code it runs)."""
    return np.sum(x * x) + np.sin(x[0]) * x[1]


def calls(repeat: int) -> None:
    """The call of ``grad(two_vector)`` and of ``jvp``, side by side with the function and with the
    generated gradient function called directly (its own work): the ratio to the function, and
    what the derivative object adds over its code."""
    x, v = np.array([0.3, 0.7]), np.array([1.0, -0.5])
    gradient = ast_ad.grad(two_vector)
    assert np.allclose(gradient(x), [2 * x[0] + np.cos(x[0]) * x[1], 2 * x[1] + np.sin(x[0])])
    code = gradient.loaded().fn  # (the generated ``two_vector_vjp``, called as it is)
    primal, ours, alone, tangent = side_by_side(
        [two_vector, gradient, code, lambda y: ast_ad.jvp(two_vector, (y,), (v,))], (x,),
        rounds=max(5, 3 * repeat))
    print(f"\nthe call of a derivative object, a function of a 2-vector: function {_fmt(primal)}; "
          f"grad(f)(x) {ours / primal:.2f}x it, its generated code called alone "
          f"{alone / primal:.2f}x (the object adds {(ours - alone) * 1e6:.2f} us); jvp "
          f"{tangent / primal:.2f}x")


def nested(repeat: int) -> None:
    """GradBench's nested-derivative evals (issue 40), each solve in its four nestings of forward
    and reverse mode, beside the same solve with its derivatives written by hand, interleaved
    (one solve each a round: a solve takes seconds)."""
    particle, saddle, solver = _gradbench()
    w0 = np.array([0.0])
    start = np.array([1.0, 1.0])
    by_hand = {
        "particle": lambda: solver.argmin(particle_miss_by_hand, particle_gradient_by_hand, w0),
        # the outer gradient through the inner ascent, by hand, as the nestings compute it
        "saddle": lambda: _saddle_through_the_loop(saddle, solver, start),
    }
    # and with what a person sees: the inner ascent's result does not move with p (the cost is a
    # sum of a part in p and one in q), so the outer gradient is 2 p, and the inner loop runs for
    # the value alone
    shortcut = {"saddle": lambda: _saddle_by_hand(saddle, solver, start)}
    solves = {
        "particle": {m: (lambda m=m: particle._solve(particle.miss_r if m[1] == "r"
                                                     else particle.miss_f, m[0])(0.0))
                     for m in ("rr", "rf", "fr", "ff")},
        "saddle": {m: _run_at(saddle._solve(m), start) for m in ("rr", "rf", "fr", "ff")},
    }
    print("\nnested derivatives (GradBench's particle and saddle), each solve against the same "
          "solve written by hand:")
    for name in ("particle", "saddle"):
        runs = [by_hand[name], *solves[name].values(), *([shortcut[name]] if name in shortcut
                                                          else [])]
        for run in runs:
            run()  # transformed before timing
        times: list[list[float]] = [[] for _ in runs]
        for _ in range(max(1, repeat // 3)):
            for k, run in enumerate(runs):
                start_time = time.perf_counter()
                run()
                times[k].append(time.perf_counter() - start_time)
        hand = statistics.median(times[0])
        cells = ", ".join(f"{m} {statistics.median(t):.2f} s ({statistics.median(t) / hand:.2f}x)"
                          for m, t in zip(solves[name], times[1:], strict=False))
        told = (f" (the outer gradient through the inner loop); by hand with the outer gradient "
                f"2 p, the inner loop not differentiated, {statistics.median(times[-1]):.2f} s"
                if name in shortcut else "")
        print(f"  {name}: by hand {hand:.2f} s{told}; {cells}")


def nested_compiled(repeat: int) -> None:
    """GradBench's ``particle`` and ``saddle`` with the whole nested derivative compiled by Numba
    (issue 40): the GradBench tool's solves in each mode (``solve_compiled``: the outer gradient
    or jvps, the inner gradients or jvps written in the bodies lowered into them, compiled), each
    solve timed
    alone, its median over rounds; the first call's compile apart, and the interpreted solve of the
    same nesting for scale."""
    particle, saddle, _ = _gradbench()
    start = np.array([1.0, 1.0])
    print("\nnested derivatives compiled whole (jit=\"numba\"):")
    for mode in ("rr", "rf", "fr", "ff"):
        runs = {
            "particle": (lambda m=mode: particle.solve_compiled(0.0, m),
                         lambda m=mode: particle._solve(
                             particle.miss_r if m[1] == "r" else particle.miss_f, m[0])(0.0)),
            "saddle": (lambda m=mode: saddle.solve_compiled(start, m),
                       lambda m=mode: saddle._solve(m)(start)),
        }
        for name, (compiled_solve, interpreted) in runs.items():
            begin = time.perf_counter()
            compiled_solve()  # (compiled at the first call)
            first = time.perf_counter() - begin
            interpreted()
            times: list[float] = []
            plain: list[float] = []
            for _ in range(max(1, repeat // 2)):
                for _ in range(10):
                    begin = time.perf_counter()
                    compiled_solve()
                    times.append(time.perf_counter() - begin)
                begin = time.perf_counter()
                interpreted()
                plain.append(time.perf_counter() - begin)
            print(f"  {name} {mode}: compiled {_fmt(statistics.median(times))} a solve (fastest "
                  f"{_fmt(min(times))}; its first call, compiling, {first:.2f} s); interpreted "
                  f"{statistics.median(plain):.2f} s")


def gmm_in_jax(jnp, jax):
    """GradBench's ``gmm`` objective (``ast_ad_gradbench.gmm.log_posterior``) for ``jax.jit``: the
    same lines, the triangular factors filled by ``.at[...].set`` where numpy writes in place."""
    def lse(v, axis):
        top = jnp.max(v, axis=axis, keepdims=True)
        return jnp.squeeze(top, axis=axis) + jnp.log(jnp.sum(jnp.exp(v - top), axis=axis))

    def log_posterior(alpha, mu, q, lower, x, gamma, m, rows, cols, constant):
        n, d = x.shape
        tri = jnp.zeros((alpha.shape[0], d, d)).at[:, rows, cols].set(lower)
        tri = tri + jnp.exp(q)[:, :, None] * jnp.eye(d)
        centred = x[:, None, :] - mu[None, :, :]
        mahalanobis = jnp.einsum("kab,nkb->nka", tri, centred)
        beta = (alpha[None, :] - 0.5 * jnp.sum(mahalanobis ** 2, axis=2)
                + jnp.sum(q, axis=1)[None, :])
        likelihood = jnp.sum(lse(beta, 1)) - n * lse(alpha, 0)
        frobenius = jnp.sum(jnp.exp(q) ** 2) + jnp.sum(lower ** 2)
        return likelihood - 0.5 * gamma ** 2 * frobenius + m * jnp.sum(q) + constant

    return log_posterior


def ode_in_jax(jnp, jax):
    """GradBench's ``ode`` objective (``ast_ad_gradbench.ode.last``) for ``jax.jit``: the same
    Runge-Kutta steps, the loop a ``lax.fori_loop`` (unrolled, its hundred steps take XLA minutes to
    compile)."""
    from ast_ad_gradbench import ode

    field = with_namespace(ode.field, jnp)

    def last(x, s):
        h = 2.0 / s

        def step(_, y):
            k1 = field(x, y)
            k2 = field(x, y + h / 2 * k1)
            k3 = field(x, y + h / 2 * k2)
            k4 = field(x, y + h * k3)
            return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

        return jax.lax.fori_loop(0, s, step, jnp.zeros(x.shape[0]))[-1]

    return last


def ode_by_hand(x, s):
    """The gradient of GradBench's ``ode`` (the last component), written by hand in numpy as a
    careful person would: the four stages' inputs kept a step, the backward pass in place on slices.
    The limit for code that runs numpy's calls one by one, as ast_ad's does."""
    h = 2.0 / s
    n = x.shape[0]
    x1 = x[1:]
    y = np.zeros(n)
    tape = []
    for _ in range(s):
        k1 = np.concatenate([x[:1], x1 * y[:-1]])
        a2 = y + h / 2 * k1
        k2 = np.concatenate([x[:1], x1 * a2[:-1]])
        a3 = y + h / 2 * k2
        k3 = np.concatenate([x[:1], x1 * a3[:-1]])
        a4 = y + h * k3
        k4 = np.concatenate([x[:1], x1 * a4[:-1]])
        tape.append((y, a2, a3, a4))
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    y_bar = np.zeros(n)
    y_bar[-1] = 1.0
    x_bar = np.zeros(n)
    for y, a2, a3, a4 in reversed(tape):
        k_bar = y_bar * (h / 6)  # k1's and k4's adjoint from the step; k2's and k3's twice it
        before = y_bar.copy()
        for a, k_next, scale in ((a4, 2 * k_bar, h), (a3, 2 * k_bar, h / 2),
                                 (a2, k_bar.copy(), h / 2)):
            # (the stage's field read ``a``; its adjoint ``k_bar``, then the next stage's)
            x_bar[0] += k_bar[0]
            x_bar[1:] += k_bar[1:] * a[:-1]
            a_bar = k_bar[1:] * x1
            before[:-1] += a_bar
            k_next[:-1] += scale * a_bar
            k_bar = k_next
        x_bar[0] += k_bar[0]
        x_bar[1:] += k_bar[1:] * y[:-1]
        before[:-1] += k_bar[1:] * x1
        y_bar = before
    return x_bar


def array_evals():
    """GradBench's array evals at their largest default workloads (``ode`` at the issue's n =
    10,000 too): (name, the objective, ast_ad's derivative, JAX's objective and derivative of the
    same code (given jax and jax.numpy), the arguments)."""
    from ast_ad_gradbench import gmm, kmeans, llsq, lse, ode
    raw = {"d": 64, "k": 100, "n": 1000, "m": 0, "gamma": 1.0,
           "alpha": rng.standard_normal(100), "mu": rng.random((100, 64)),
           "q": 0.1 * rng.standard_normal((100, 64)),
           "l": 0.1 * rng.standard_normal((100, 64 * 63 // 2)),
           "x": rng.standard_normal((1000, 64))}
    given = gmm._input(raw)

    def kmeans_in_jax(jax, cost):
        def direction(points, centroids):
            gradient = jax.grad(cost, argnums=1)
            g, h = jax.jvp(lambda c: gradient(points, c), (centroids,),
                           (jax.numpy.ones_like(centroids),))
            return g / h
        return direction

    def gmm_pair(jax, jnp):
        fn = gmm_in_jax(jnp, jax)
        return (jax.jit(fn, static_argnums=(6,)),
                jax.jit(jax.grad(fn, argnums=(0, 1, 2, 3)), static_argnums=(6,)))

    cases = [
        ("lse, n = 1,280,000", lse.logsumexp, lse.gradient_of_lse,
         lambda jax, jnp: (jax.jit(with_namespace(lse.logsumexp, jnp)),
                           jax.jit(jax.grad(with_namespace(lse.logsumexp, jnp)))),
         (rng.random(1_280_000),)),
        ("llsq, n = 16,392, m = 128", llsq.llsq, llsq.gradient_of_llsq,
         lambda jax, jnp: (jax.jit(with_namespace(llsq.llsq, jnp), static_argnums=1),
                           jax.jit(jax.grad(with_namespace(llsq.llsq, jnp)), static_argnums=1)),
         (rng.standard_normal(128), 16392)),
        ("gmm, d = 64, k = 100, n = 1,000", gmm.log_posterior, gmm.gradient, gmm_pair, given),
        ("kmeans, k = 1,000, n = 10,000, d = 16", kmeans.cost,
         lambda p, c: kmeans.direction((p, c)),
         lambda jax, jnp: (jax.jit(with_namespace(kmeans.cost, jnp)),
                           jax.jit(kmeans_in_jax(jax, with_namespace(kmeans.cost, jnp)))),
         (rng.random((10_000, 16)), rng.random((1_000, 16)))),
    ]
    for n in (10_000, 100_000):
        cases.append((f"ode, n = {n:,}, s = 100", ode.last, ode.gradient_of_last,
                      lambda jax, jnp: (jax.jit(ode_in_jax(jnp, jax), static_argnums=1),
                                        jax.jit(jax.grad(ode_in_jax(jnp, jax)),
                                                static_argnums=1)),
                      (rng.random(n), 100)))
    return cases


def arrays(repeat: int) -> None:
    """GradBench's array evals (issue 41): each objective and derivative, ast_ad's against
    ``jax.jit``'s of the same code, side by side (JAX's times stop at ``block_until_ready``, its
    compile excluded). The two derivatives are checked against each other first."""
    jax, jnp = _jax()
    _gradbench()
    print("\nGradBench's array evals: ast_ad (numpy) against jax.jit, the same code")
    only = [a for a in sys.argv[2:] if not a.startswith("--")]
    for name, objective, derivative, jax_of, args in array_evals():
        if only and not any(name.startswith(o) for o in only):
            continue
        if jax is None:
            ours = side_by_side([objective, derivative], args, rounds=repeat)
            print(f"  {name}: objective {_fmt(ours[0])}, derivative {_fmt(ours[1])} (no JAX)")
            continue
        jit_objective, jit_derivative = jax_of(jax, jnp)
        theirs = [jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
        mine, their = derivative(*args), jit_derivative(*theirs)
        for a, b in zip(mine if isinstance(mine, tuple) else (mine,),
                        their if isinstance(their, tuple) else (their,), strict=True):
            # the same derivative (nan where both divide zero by zero: a centroid no point is
            # nearest)
            assert np.allclose(a, np.asarray(b), rtol=1e-7, atol=1e-9, equal_nan=True), name
        # (``ode``'s gradient written by hand in numpy too: the limit of numpy's calls one by one)
        by_hand = [functools.partial(ode_by_hand, *args)] if name.startswith("ode") else []
        if by_hand:
            assert np.allclose(by_hand[0](), mine, rtol=1e-12, atol=1e-14), name
        times = side_by_side(
            [functools.partial(objective, *args), functools.partial(derivative, *args),
             functools.partial(_blocked, jax, jit_objective, theirs),
             functools.partial(_blocked, jax, jit_derivative, theirs), *by_hand], (),
            rounds=repeat)
        hand = (f"; by hand in numpy {_fmt(times[4])}, {times[4] / times[3]:.2f}x jax.jit"
                if by_hand else "")
        print(f"  {name}: objective {_fmt(times[0])} (jax.jit {_fmt(times[2])}), derivative "
              f"{_fmt(times[1])} ({times[1] / times[0]:.1f}x it; jax.jit {_fmt(times[3])}): "
              f"ast_ad / jax.jit {times[1] / times[3]:.2f}{hand}")


def det_lstm_evals():
    """GradBench's ``det`` (expansion by minors, l = 8) and ``lstm`` (its eval's sizes: l = 2 and 4
    layers, c = 1,024 characters of b bits each, b = ceil(log2 of the largest code), parameters
    uniform in [0, 1) as its generator draws them): (name, objective, derivative, arguments, the
    derivative checked, the issue's target ratio, the C++ tools' ratios). The text is this file's
    ASCII characters (the eval's own text file is not in the repository; ASCII gives its b = 7)."""
    _gradbench()
    from ast_ad_gradbench import det, lstm

    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 8))
    tables = det.minors(8)

    def det_checked(g):
        return np.allclose(g, np.linalg.det(a) * np.linalg.inv(a).T, rtol=1e-8)

    cases = [("det, l = 8", det.det, det.gradient_of_det, (a, tables), det_checked, 8.0,
              "ad-hpp 2.9x, manual 8x")]
    text = "".join(c for c in pathlib.Path(__file__).read_text() if 32 <= ord(c) < 127)[:1024]
    bits = math.ceil(math.log2(max(ord(c) for c in text)))
    sequence = np.array([[float(d) for d in format(ord(c), f"0{bits}b")] for c in text])
    for layers in (2, 4):
        main = rng.random((2 * layers, 4 * bits))
        extra, state = rng.random((3, bits)), rng.random((2 * layers, bits))
        args = (main, extra, state, sequence)

        def lstm_checked(g, args=args):
            # along one random direction of both parameters, against central differences
            du, de = rng.standard_normal(args[0].shape), rng.standard_normal(args[1].shape)
            h = 1e-6
            ahead = lstm.loss(args[0] + h * du, args[1] + h * de, *args[2:])
            behind = lstm.loss(args[0] - h * du, args[1] - h * de, *args[2:])
            return math.isclose(np.sum(g[0] * du) + np.sum(g[1] * de), (ahead - behind) / (2 * h),
                                rel_tol=1e-5)
        cases.append((f"lstm, l = {layers}, c = 1,024, b = {bits}", lstm.loss, lstm.gradient,
                      args, lstm_checked, 4.0, "CoDiPack 2.1x"))
    return cases


def sequences(repeat: int) -> None:
    """GradBench's ``det`` and ``lstm`` (issue 41): the derivative against its objective, side by
    side, beside the issue's targets and the C++ tools' figures on GradBench's site."""
    print("\nGradBench's det and lstm: derivative / objective")
    for name, objective, derivative, args, checked, target, theirs in det_lstm_evals():
        assert checked(derivative(*args)), name
        times = side_by_side([objective, derivative], args, rounds=repeat)
        print(f"  {name}: objective {_fmt(times[0])}, derivative {_fmt(times[1])}: "
              f"{times[1] / times[0]:.2f}x (target {target:g}x; {theirs})")


def _blocked(jax, fn, args):
    """``fn(*args)``, JAX's asynchronous dispatch finished."""
    return jax.block_until_ready(fn(*args))


def _run_at(solve, start):
    return lambda: solve(start)


def _saddle_through_the_loop(saddle, solver, start):
    """``saddle``'s solve with its derivatives by hand as ast_ad's make them: the inner slope
    ``-2 q`` written out, and the outer gradient through the inner ascent, ``dq/dp`` (2 x 2)
    carried along each step in forward mode (``saddle.best_reply``'s loop, differentiated by
    hand)."""
    def slope(p, q):
        return -2.0 * q

    def reply(p):
        return saddle.best_reply(p, start, slope)

    def reply_gradient(p):
        q, moves = start, np.zeros((2, 2))  # dq/dp
        fq = -saddle.cost(p, q)
        gq, g_moves = 2.0 * q, 2.0 * moves  # -slope, and its derivative in p
        eta, i = 1e-5, 0
        while np.sqrt(np.sum(gq * gq)) > 1e-5:
            if i == 10:
                eta, i = 2.0 * eta, 0
                continue
            q_new, moves_new = q - eta * gq, moves - eta * g_moves
            if np.sqrt(np.sum((q - q_new) ** 2)) <= 1e-5:
                break
            f_new = -saddle.cost(p, q_new)
            if f_new < fq:
                q, moves, fq = q_new, moves_new, f_new
                gq, g_moves = 2.0 * q, 2.0 * moves
                i += 1
            else:
                eta, i = eta / 2.0, 0
        return 2.0 * p + (-2.0 * q) @ moves  # cost(p, q): 2 p, and -2 q through dq/dp

    x = solver.argmin(reply, reply_gradient, start)
    y = solver.argmin(lambda q: -saddle.cost(x, q), lambda q: 2.0 * q, start)
    return np.concatenate([x, y])


def _saddle_by_hand(saddle, solver, start):
    def reply(p):
        return saddle.best_reply(p, start, lambda x, y: -2.0 * y)
    x = solver.argmin(reply, lambda p: 2.0 * p, start)
    y = solver.argmin(lambda q: -saddle.cost(x, q), lambda q: 2.0 * q, start)
    return np.concatenate([x, y])


def _fmt(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    return f"{seconds * 1e3:.2f} ms"


if __name__ == "__main__":
    repeat = 3 if "--quick" in sys.argv else 7
    if "checkpointing" in sys.argv:
        checkpointing(repeat)
    elif "gradients" in sys.argv:
        gradients(repeat)
    elif "second-order" in sys.argv:
        second_order(repeat)
    elif "compiled" in sys.argv:
        compiled(repeat)
    elif "spectral" in sys.argv:
        spectral(repeat)
    elif "solvers" in sys.argv:
        solvers(repeat)
    elif "ordinary" in sys.argv:
        ordinary(repeat)
    elif "nested" in sys.argv:
        nested(repeat)
    elif "nested-compiled" in sys.argv:
        nested_compiled(repeat)
    elif "calls" in sys.argv:
        calls(repeat)
    elif "batched" in sys.argv:
        batched(repeat)
    elif "arrays" in sys.argv:
        arrays(repeat)
    elif "sequences" in sys.argv:
        sequences(repeat)
    elif "startup" in sys.argv:
        startup()
        transform_times()
    else:
        main(repeat)
