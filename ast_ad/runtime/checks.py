"""Run-time checks generated code makes where ast_ad could not decide at transform time: that an
array written in place is not shared, that a name is bound, that arguments' ranks are what a rule
needs."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np

from ast_ad.errors import UnsupportedDerivativeError
from ast_ad.runtime.arrays import error_class, is_array, unsupported_at, zeros_like


def check_dot_rank(a: Any, b: Any) -> Any:
    """``np.dot`` of arrays of three or more dimensions is not matmul: refuse it."""
    if np.ndim(a) > 2 or np.ndim(b) > 2:
        raise UnsupportedDerivativeError(
            "the gradient of np.dot on arrays with more than 2 dimensions is not supported: use "
            "np.matmul or np.tensordot"
        )


def refuse_unless(ok: Any, *message: Any) -> None:
    """Raise ``UnsupportedDerivativeError`` unless ``ok``, its message the parts given, joined.
    Written as a call (an f-string is outside the language), a helper's refusal keeps the helper in
    the language ast_ad differentiates (``forward.by_source``)."""
    if not ok:
        raise UnsupportedDerivativeError("".join(str(part) for part in message))


def zip_length(*lengths: Any) -> Any:
    """The length of ``zip(*seqs, strict=True)`` over sequences of these lengths: Python's error
    where they differ."""
    for k, n in enumerate(lengths[1:], start=2):
        if n != lengths[0]:
            raise ValueError(
                f"zip() argument {k} is {'shorter' if n < lengths[0] else 'longer'} than argument 1"
            )
    return int(lengths[0])  # a count: no gradient passes (the registry declares it so)


def index_derivative(index: Any, written: bool = False) -> float:
    """The derivative of ``x[index]`` in its index, where the index comes from the differentiated
    inputs (a key read off a list of a dict's keys, a position off a tape): none, since an integer,
    a string or a slice is discrete (0.0, which adds nothing). A key or index that is a number
    with a fraction (a float, a complex; an array of them) is refused: a lookup at it has no
    derivative, and zero would be an approximation."""
    if _discrete(index):
        return 0.0
    raise UnsupportedDerivativeError(
        f"this line {'writes' if written else 'reads'} an item at a key that is a float computed "
        "from the differentiated inputs, which has no derivative: compute the key from values "
        "that are not differentiated"
    )


def key_tangent(index: Any, like: Any) -> Any:
    """The tangent ``x[index] = v`` takes from its index, where the index comes from the
    differentiated inputs: zeros like the written object (``like``) for a discrete index; a key
    that is a number with a fraction is refused where it is written (a dict keyed by it would hand
    the key back, from ``list(d)`` or a loop, as a value whose derivative nobody follows)."""
    if not _discrete(index):
        raise UnsupportedDerivativeError(
            "this line writes an item at a key that is a float computed from the differentiated "
            "inputs, whose derivative a dict does not keep: compute the key from values that are "
            "not differentiated"
        )
    return zeros_like(like)


def _discrete(index: Any) -> bool:
    """Whether ``index`` is made of discrete parts only: no float or complex number in it."""
    if isinstance(index, tuple):
        return all(_discrete(part) for part in index)
    if isinstance(index, (float, complex, np.inexact)):
        return False
    return not (is_array(index) and np.asarray(index).dtype.kind in "fc")


def loop_length(xs: Any, where: Any) -> Any:
    """The number of steps of ``for item in xs``, which generated code takes as ``xs[k]`` for ``k``
    in ``range(loop_length(xs))``: Python's items in Python's order where ``xs`` is a sequence (a
    list, a tuple, a string, a range, an array: anything read by position). A dict or another
    mapping (whose positions are not its keys), a set (which has none) and an iterator (no length)
    are refused at the user's line (``where``, its file's name and the line's number), saying what
    to write. A loop over one that the function makes, or over a dict or set argument, is lowered
    over its keys or members (``keys_of``, ``optimize.keyed``); this is what is known only here."""
    if not isinstance(xs, (Mapping, AbstractSet)) and hasattr(xs, "__len__"):
        return len(xs)
    what = (
        "dict" if isinstance(xs, Mapping) else "set" if isinstance(xs, AbstractSet)
        else f"{type(xs).__name__} (an iterator, which has no length)"
    )
    message = (
        f"this loop steps through a {what} that comes into the function or from a call, which "
        "ast_ad reads by position only for lists, tuples, strings, ranges and arrays: loop over "
        "list(...) of it (a dict's keys, a set's members, an iterator's items, in Python's order)"
    )
    raise unsupported_at(message, where)


def check_in_place(target: Any, others: Any, where: Any, names: Any = None) -> Any:
    """Refuse an in-place update of an object that another live variable also reaches.

    An array is changed for every array that shares its memory; a list or dict for every
    name bound to it. Containers among ``others`` are searched, so ``a = ys[0]`` counts
    as reaching ``ys[0]``'s array. ``names``: the variables ``others`` are, for the message.
    """
    if not (is_array(target) or isinstance(target, (list, dict))):
        return
    array = is_array(target)
    stack = list(others)  # a walk of ``others`` and everything inside them (a loop: a tape is long)
    found = False
    while stack and not found:
        obj = stack.pop()
        if isinstance(obj, (list, tuple)):
            stack.extend(obj)
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        found = obj is target or (array and is_array(obj) and _may_share_memory(target, obj))
    if found:
        error = error_class("InPlaceAliasError", ValueError)
        who = f"another variable ({names})" if names else "another variable"
        other = (names if "," not in names else f"the one of {names} that holds it") if names \
            else "the other variable"
        raise error(f"{where}: this in-place update changes an object that {who} also refers to "
                    "in a way ast_ad does not follow here (Python changes both): write into "
                    f"{other} itself, or, if {other} should keep its value, make the object this "
                    "line changes a copy where it is made (.copy()), or write the update as a new "
                    "value (v = v + ... for v += ...)")


def check_item_apart(root: Any, keys: Any, where: Any, names: Any = None) -> Any:
    """Refuse a write into the object ``root[k1]...[kn]`` (``keys``) where another slot of a
    container on the way reaches it too.

    ``pair = [y, y]; pair[0][1] = v`` changes the one array both slots hold, so Python's ``pair[1]``
    sees the write; ast_ad writes a new array back into slot 0 alone. So does ``box = [y, [y]];
    box[1][0][0] = v`` for ``box[0]``, a slot of the outer list. An array on the way (``A[0][i] =
    v`` of an array ``A``) has no other slot to share it with, and is left to the guards of the
    array itself. ``names``: the variable ``root`` is, for the message.
    """
    containers = [root]
    for key in keys[:-1]:
        if not isinstance(containers[-1], (list, tuple, dict)):
            break
        containers.append(containers[-1][key])
    if not isinstance(containers[-1], (list, tuple, dict)):
        return
    target = containers[-1][keys[len(containers) - 1]]
    for container, key in zip(containers, keys, strict=False):
        if isinstance(container, dict):
            rest = [item for k, item in container.items() if k != key]
        elif isinstance(key, (int, np.integer)) and container:
            k = int(key) % len(container)
            rest = [*container[:k], *container[k + 1:]]
        else:
            # a slice of slots: their objects, compared with the one the slice read
            rest = list(container)
        check_in_place(target, rest, where, f"{names}, in another slot" if names else None)


def _may_share_memory(a: Any, b: Any) -> bool:
    """Whether two arrays may share memory: numpy tells for its own arrays. For another library's
    arrays of one type, they are taken to share it (dask cannot tell without computing both): a
    refusal, never a guess that they are apart."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return bool(np.may_share_memory(a, b))
    return type(a) is type(b)


def check_kept(value: Any, message: Any) -> Any:
    """Refuse to pass an array, list or dict to a function that changes that argument in place."""
    if is_array(value) or isinstance(value, (list, dict)):
        error = error_class("InPlaceAliasError", ValueError)
        raise error(message)


def check_jvp_layout(where: Any, primal: Any, tangent: Any, *more: Any) -> None:
    """``ast_ad.jvp(f, primals, tangents)`` written in a body and lowered in place (the forward-mode
    code of ``f`` made for any numbers and arrays): each differentiated primal, paired with its
    tangent, a float or a numpy array of 64-bit floats (where ``jvp`` of float32 gives float32, the
    code, made for 64-bit floats, would not), and the tangent a number or an array of its
    primal's shape, as the API's ``jvp`` asks; else an error that says how to keep the general path
    (``compose.JvpOf``, which takes lists, dicts and complex numbers too), since that code, given a
    list or a tangent of another shape, would not compute what ``jvp`` computes (``t * 2`` of a
    list repeats it). ``where``: the user's line that wrote the jvp; then each primal and its
    tangent. It runs on every call of the code it guards: the common cases (floats, arrays of one
    shape) are decided first, and the error class is looked up only to raise."""
    pairs = (primal, tangent, *more)
    for k in range(0, len(pairs), 2):
        p, t = pairs[k], pairs[k + 1]
        if type(p) is float or type(p) is np.float64:
            if type(t) is float or type(t) is np.float64 or type(t) is int:
                continue
        elif type(p) is np.ndarray and p.dtype == np.float64 and type(t) is np.ndarray \
                and t.dtype == np.float64 and t.shape == p.shape:
            continue
        _refuse_jvp_layout(where, p, t)


def check_gradient_layout(where: Any, arg: Any, *more: Any) -> None:
    """``ast_ad.grad(f, argnums)(...)`` written in a body and lowered in place (the gradient code
    of ``f`` made for any numbers and arrays): each differentiated argument a float or a numpy array
    of 64-bit floats, what that code was made for; else an error that says how to keep the general
    path (a gradient held in a name is the primitive ``api.gradient.Gradient``, which takes lists,
    dicts and other dtypes too). ``where``: the user's line that wrote the call."""
    for a in (arg, *more):
        if type(a) is float or type(a) is np.float64 \
                or type(a) is np.ndarray and a.dtype == np.float64:
            continue
        kind = type(a).__name__ + (f" of {a.dtype}" if type(a) is np.ndarray else "")
        kind = ("an " if kind[0] in "aeiou" else "a ") + kind
        raise error_class("ASTADError", ValueError)(
            f"{where}: ast_ad.grad(f)(...) written in a differentiated function differentiates "
            f"floats and numpy arrays of 64-bit floats here, not {kind}: for lists, dicts, "
            "integers or other dtypes, hold the gradient in a name (g = ast_ad.grad(f); g(...))"
        )


def check_gradient_value(where: Any, out: Any) -> None:
    """The value of a gradient lowered in place (``check_gradient_layout``) a real number, as
    ``ast_ad.grad`` asks: the code's seed, ``1.0``, would otherwise broadcast over an array and
    sum its entries' gradients."""
    if type(out) is float or type(out) is np.float64 or type(out) is int:
        return
    if np.ndim(out) == 0 and np.isrealobj(out) and not isinstance(out, (str, bytes)):
        return
    raise error_class("NonScalarOutputError", ValueError)(
        f"{where}: ast_ad.grad(f) needs f to return a real number, but it returned "
        f"{type(out).__name__}" + (f" of shape {np.shape(out)}" if is_array(out) else "")
        + ": take ast_ad.jacobian(f) for a vector, or reduce it (np.sum) first"
    )


def _refuse_jvp_layout(where: Any, p: Any, t: Any) -> None:
    """``check_jvp_layout``'s error for a primal ``p`` and tangent ``t`` it does not take."""
    error = error_class("ASTADError", ValueError)
    for value, what in ((p, "argument"), (t, "tangent")):
        kind = type(value)
        if kind is float or kind is np.float64 or kind is np.ndarray and value.dtype == np.float64 \
                or kind is int and what == "tangent":
            continue
        raise error(
            f"{where}: ast_ad.jvp written in a differentiated function takes floats and numpy "
            f"arrays of 64-bit floats here, not a {kind.__name__}"
            + (f" of {value.dtype}" if kind is np.ndarray else "")
            + f" {what}: for lists, dicts, complex numbers, integers or other dtypes, hold "
            "the tangents in a name (t = (...); ast_ad.jvp(f, primals, t))"
        )
    raise error(
        f"{where}: the tangent has shape {np.shape(t)}, but its argument has shape "
        f"{np.shape(p)}: a tangent has its primal's shape"
    )


def check_bound(bound: Any, name: Any, where: Any) -> None:
    """Python's error where a local name is read before any assignment of it ran (``unbound``): the
    loop that binds it ran no step, or the branch that does was not taken."""
    if not bound:
        raise UnboundLocalError(
            f"{where}: cannot access local variable {name!r} where it is not associated with "
            "a value"
        )


class NoTangent:
    """The tangent of a part of a result that has none (``quad``'s error estimate, the times
    ``solve_ivp`` chose): forward mode carries this in its place, and any arithmetic with it (the
    part used in what is differentiated) raises ``why``, as reverse mode refuses its adjoint."""

    def __init__(self, why: str):
        self.why = why

    def __repr__(self) -> str:
        return f"NoTangent({self.why!r})"

    def refuse(self, *_: Any, **__: Any) -> Any:
        raise UnsupportedDerivativeError(self.why)

    def __add__(self, other: Any) -> Any:
        # the contributions of the call's arguments, added (each says the same)
        if isinstance(other, NoTangent) or other is None:
            return self
        return self.refuse()

    __radd__ = __add__

    def __getitem__(self, index: Any) -> Any:
        return self  # (a part of it has none either)

    __sub__ = __rsub__ = __mul__ = __rmul__ = refuse
    __truediv__ = __rtruediv__ = __pow__ = __rpow__ = __neg__ = __pos__ = __abs__ = refuse
    __float__ = __array__ = __array_ufunc__ = __array_function__ = refuse


# what is never a ``NoTangent`` nor holds one (checked first: most tangents are these)
_PLAIN_TANGENTS = frozenset({np.ndarray, float, np.float64, int, type(None)})


def refuse_missing_tangents(value: Any) -> None:
    """Raise where a tangent a function returns (or a part of one) is a ``NoTangent``: what it
    returns has no derivative, even where nothing added to it."""
    if type(value) in _PLAIN_TANGENTS:
        return
    if isinstance(value, NoTangent):
        value.refuse()
    if isinstance(value, (tuple, list)):
        for part in value:
            if type(part) not in _PLAIN_TANGENTS:
                refuse_missing_tangents(part)
    elif isinstance(value, dict):
        for part in value.values():
            refuse_missing_tangents(part)
