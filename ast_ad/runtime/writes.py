"""Writes into arrays: an item assigned into a copy (``assign_item``) and its adjoints, views of a
base (``view_of``: a view made again after its base is written) and the slots of containers that
hold an array."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ast_ad.errors import UnsupportedDerivativeError
from ast_ad.runtime.arrays import (
    add_adjoints,
    as_array,
    copy_as,
    inverse_axes,
    is_array,
    size_of,
    unbroadcast,
    zeros_like,
    zeros_of,
)
from ast_ad.runtime.checks import _may_share_memory, check_in_place


def scatter_add(out: Any, index: Any, g: Any) -> Any:
    """``np.add.at(out, index, g)``: ``out[index] += g`` in place, repeated indices adding up;
    ``out``.

    dask has no ``np.add.at``: for one integer array among slices, as ``x[idx]`` and ``x[:, idx]``
    are, the entries are added in as many plain writes as an index repeats (``x[idx] = x[idx] + g``
    with ``idx``'s entries distinct each time), which dask runs lazily. Other fancy indices of such
    an array are refused.
    """
    try:
        np.add.at(out, index, g)
        return out
    except TypeError:
        if isinstance(out, np.ndarray):
            raise
    parts = index if isinstance(index, tuple) else (index,)
    fancy = [j for j, part in enumerate(parts) if _fancy(part)]
    ints = [j for j, part in enumerate(parts) if isinstance(part, (int, np.integer))]
    run = sorted(fancy + ints)
    if (
        len(fancy) != 1
        or not all(isinstance(part, slice) for j, part in enumerate(parts) if j not in run)
        or run != list(range(run[0], run[0] + len(run)))
        or not isinstance(parts[fancy[0]], (list, np.ndarray))
    ):
        raise UnsupportedDerivativeError(
            f"the gradient of reading a {type(out).__name__} at this index: {type(out).__name__} "
            "cannot add at "
            "repeated indices (np.add.at) except for one numpy integer array among slices and "
            "integers "
            "(x[idx], x[:, idx], x[idx, 1])"
        )
    # x[idx, 1] is x[idx, 1:2] without that axis: the same entries, with one integer array alone
    if ints:
        dims = np.ndim(parts[fancy[0]])
        g = np.expand_dims(g, tuple(j if j < fancy[0] else j - 1 + dims for j in ints))
        parts = tuple(slice(part % out.shape[j], part % out.shape[j] + 1) if j in ints else part
                      for j, part in enumerate(parts))
    p = fancy[0]
    positions = np.asarray(parts[p])
    flat = np.ravel(positions % out.shape[p])
    g = np.reshape(g, np.shape(g)[:p] + (flat.size,) + np.shape(g)[p + positions.ndim:])
    order = np.argsort(flat, kind="stable")
    ranked = flat[order]
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
    # how many earlier entries of the index name the same place
    repeat = np.empty(flat.size, dtype=np.intp)
    repeat[order] = np.arange(flat.size) - np.repeat(starts, np.diff(np.r_[starts, flat.size]))
    for level in range(int(repeat.max()) + 1 if flat.size else 0):
        chosen = np.flatnonzero(repeat == level)
        where = parts[:p] + (flat[chosen],) + parts[p + 1:]
        out[where] = out[where] + np.take(g, chosen, axis=p)
    return out


def assign_item(x: Any, index: Any, value: Any) -> Any:
    """``x`` with ``x[index] = value``, as a new array (or list): ``y[i] = v`` in generated code.

    The new array keeps ``x``'s dtype, as numpy's write does: a float written into an
    integer array is truncated (and takes no gradient, see ``assign_item_vjp_value``); and its
    layout (``order="K"``), as a write in place does, so that what is read of it later (a sum, in
    the order of its memory) adds in Python's order: a write through ``m.T`` copied C-ordered made
    ``m`` Fortran-ordered again, and its sum one bit off Python's. A numpy array Python could not
    write (read-only) raises numpy's error.
    """
    # ``params[1][0] = v`` writes the new item back into a tuple it reads: a new tuple
    if isinstance(x, tuple):
        items = list(x)
        items[index] = value
        return type(x)(*items) if hasattr(x, "_fields") else tuple(items)
    if type(x) is np.ndarray and not x.flags.writeable:
        # (``np.imag`` of a real array, ``np.broadcast_to``...: numpy's write raises, and so this)
        raise ValueError("assignment destination is read-only")
    out: Any = (
        type(x)(x) if isinstance(x, (list, dict))
        else x.copy(order="K") if type(x) is np.ndarray
        else x.copy() if is_array(x) else np.array(x)
    )
    out[index] = value
    return out


def owned_adjoint(g: Any, x: Any) -> Any:
    """A dense copy of ``g``, the adjoint of the array ``x``, that a loop can update in place.

    ``g`` may still be the float zero an adjoint starts as. The copy is the loop's own: nothing else
    holds it, so writing into it changes no other adjoint. A list's (or dict's) adjoint is a list
    (dict) of owned adjoints of its items; a number's is the number (nothing can write into it).
    """
    if type(x) is np.ndarray and type(g) is float and g == 0.0:
        # (the most common: an adjoint nothing has flowed into yet)
        dtype = x.dtype if x.dtype.kind in "fc" else np.dtype(float)
        zeros = cotangent_zeros(x, dtype)
        return np.zeros(x.shape, dtype) if zeros is None else zeros
    if isinstance(x, (list, dict)):
        keys = range(len(x)) if isinstance(x, list) else list(x)
        parts = {
            k: (0.0 if g is None or isinstance(g, float) or g[k] is None else g[k]) for k in keys
        }
        owned = {k: owned_adjoint(parts[k], x[k]) for k in keys}
        return [owned[k] for k in keys] if isinstance(x, list) else owned
    if not is_array(x):
        return g
    if not is_array(g):  # the float zero an adjoint starts as: a batch of zeros, in a batched pass
        zeros = cotangent_zeros(x, np.result_type(x, g, 1.0))
        if zeros is not None:
            return zeros
    return zeros_of(x, dtype=np.result_type(x, g, 1.0)) + g


def cotangent_zeros(x: Any, dtype: Any) -> Any:
    """Zeros of ``x``'s shape for an adjoint a loop adds into, where a backward pass carries a batch
    of cotangents (``runtime.batched.cotangent_size``, set by ``vjp_fn(..., batched=True)``): a
    batch of them; else ``None``. (An exported module, which runs without ast_ad, has no such
    pass: ``None``. It reads ``sys`` from the module, as an exported one imports it too
    (``export.STANDARD_NAMES``): an ``import`` statement here cost more than the rest.)"""
    batched = sys.modules.get("ast_ad.runtime.batched")
    if batched is None:
        return None
    size = batched.cotangent_size.get()
    return None if size is None else batched.Batch.zeros(size, np.shape(x), dtype)


def add_into(x: Any, index: Any, value: Any) -> None:
    """``x[index] += value`` in place, repeated indices adding up (``np.add.at``): a read's
    adjoint."""
    if type(index) is not int and _fancy(index):
        scatter_add(x, index, value)
    else:  # an integer, a slice or a mask names each entry once
        x[index] += value


def entries(x: Any, index: Any) -> Any:
    """A copy of ``x[index]``: the entries a write is about to overwrite."""
    taken = x[index]
    return taken.copy() if is_array(taken) else taken


def detached(x: Any) -> Any:
    """``x`` with every array in it copied: a result that the backward pass, which writes the arrays
    of the forward pass back as they were, must not change."""
    if is_array(x):
        return x.copy()
    if isinstance(x, dict):
        return {key: detached(item) for key, item in x.items()}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(detached(item) for item in x))
    if isinstance(x, (tuple, list)):
        return type(x)(detached(item) for item in x)
    return x


def assign_item_vjp_x(g: Any, x: Any, index: Any) -> Any:
    """The overwritten entries take no gradient."""
    if isinstance(x, dict):
        return {key: item for key, item in g.items() if key in x and key != index} | \
            ({index: zeros_like(x[index])} if index in x else {})
    if isinstance(x, (list, tuple)):
        parts = list(g)
        parts[index] = zeros_like(x[index])
        return parts if isinstance(g, list) else tuple(parts)
    out = copy_as(g, np.result_type(g, 1.0))  # floats, or complex numbers
    out[index] = 0.0
    return out


def assign_item_vjp_value(g: Any, ans: Any, index: Any, value: Any) -> Any:
    """The written entries' adjoint; where an index repeats, only the last write landed (numpy's
    rule).

    Written into an integer array, the value was truncated: it takes no gradient.
    """
    if is_array(ans) and ans.dtype.kind in "biu":
        return zeros_like(value)
    taken = g[index]
    if type(value) in (float, np.float64) and not is_array(taken):
        return taken  # one entry, written once: its adjoint (a copy, as numbers are)
    if isinstance(taken, np.ndarray) and isinstance(g, np.ndarray):
        if np.may_share_memory(taken, g):
            taken = taken.copy()  # a view of the adjoint, which a loop may then zero in place
    elif is_array(taken):
        taken = taken.copy()  # another library's array: it may be a view too
    if is_array(g) and _fancy(index):
        order = np.arange(size_of(taken)).reshape(np.shape(taken))
        stamp = np.full(np.shape(g), -1)
        stamp[index] = order
        taken = np.where(stamp[index] == order, taken, 0.0)
    return unbroadcast(taken, value)


def _fancy(index: Any) -> Any:
    """Whether ``index`` holds an integer array or list, which may repeat entries."""
    if isinstance(index, (int, np.integer, slice)):  # the common cases, first
        return False
    if isinstance(index, tuple):
        return any(_fancy(part) for part in index)
    return (isinstance(index, list) or is_array(index)) and as_array(index).dtype.kind in "iu"


def copied(dst: Any, src: Any) -> Any:
    """``np.copyto(dst, src)`` as a new array: ``src`` broadcast to ``dst``'s shape, in ``dst``'s
    dtype."""
    out = dst.copy()
    np.copyto(out, src)  # numpy's own casting rules and errors
    return out


def add_at(x: Any, index: Any, value: Any) -> Any:
    """``np.add.at(x, index, value)`` as a new array: repeated indices add up."""
    out = copy_as(x, np.result_type(x, value))
    scatter_add(out, index, value)
    return out


def view_of(target: Any, other: Any, probe: Any, inverse: Any, where: Any, name: Any = None) -> int:
    """How ``other`` sees ``target``, an object about to change in place: what it is after the
    change.

    1: the same object, or the same memory laid out alike (``z = y``): it is the changed object; 2:
    the view ``probe`` describes, made before the change: ``other`` is ``probe``, a view of
    ``target`` (``w = y[1:]``: after the change, it is that view of the changed array), or, with
    ``inverse``, ``target`` is ``probe``, a view of ``other`` (a write through ``w = y[1:]`` changes
    ``y[1:]``); 0: apart (nothing of ``other`` changes). Any other overlap of memory is refused:
    which entries of ``other`` the change reaches is not known here.
    """
    if not (is_array(target) or isinstance(target, (list, dict))):
        return 0  # a number, a tuple: ``x += d`` binds a new object, which no other name sees
    if other is target:
        return 1
    # ``a = ys[0]``, ``a`` changes
    if inverse and probe is target and isinstance(other, (list, tuple, dict)):
        items = list(other.values()) if isinstance(other, dict) else list(other)
        rest = [item for item in items if item is not target]
        if len(items) - len(rest) == 1:
            check_in_place(target, rest, where, name)  # (no other slot may see it, deep)
            return 2
    if is_array(target) and is_array(other):
        if not _may_share_memory(target, other):
            return 0
        if _same_view(other, target):
            return 1
        if probe is not None and _same_view(target if inverse else other, probe):
            return 2
    check_in_place(target, (other,), where, name)  # (an array it overlaps otherwise: refused)
    return 0


def view_probe(base: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(base, *args)``, the view a variable would be of ``base``, for ``view_of`` to compare;
    ``None`` where ``base`` is no array or container (a name a branch or a loop has not bound yet:
    it sees nothing)."""
    if base is None or not (is_array(base) or isinstance(base, (list, tuple, dict))):
        return None
    try:
        return fn(base, *args, **kwargs)
    except (IndexError, KeyError, TypeError, ValueError):
        return None  # (no such view of this value: it is not that view)


def is_same(a: Any, b: Any) -> bool:
    """``a is b``: two variables the memory model follows through one write are one object (no
    gradient). ``None`` is no such object: a write changes no ``None``, and two names not bound yet
    (both hold it until they are) are not made one by it. Nor is a number: ``x += d`` binds a new
    one, and two names of one float (``f(0.0, 0.0)`` may pass one object twice) stay two
    variables, whose gradients are their own."""
    return a is b and a is not None and not isinstance(a, (int, float, complex, np.number))


def _same_view(a: Any, b: Any) -> bool:
    """Whether two numpy arrays read the same memory in the same layout (the same view)."""
    return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape \
        and a.strides == b.strides and a.dtype == b.dtype \
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]


def _slots(container: Any) -> list[Any]:
    return list(container) if isinstance(container, dict) else list(range(len(container)))


def unreshaped(base: Any, view: Any, *args: Any) -> Any:
    """The array ``base`` once a view of it in another shape (``np.reshape``, ``np.ravel``...) was
    written: the view's entries in ``base``'s shape, in the order both read them."""
    return np.reshape(view, np.shape(base))


def unreal(base: Any, view: Any) -> Any:
    """The array a written ``np.real(z)`` (``z.real``) is a view of: ``z`` with the view as its
    real parts, its imaginary parts as they were (of a real array, the view is the array itself).
    Written part by part, as numpy's write is: ``view + 1j * imag`` would turn an infinite
    imaginary part's real part into nan."""
    if not np.iscomplexobj(base):
        return view
    out = np.array(base, copy=True)
    out.real = view
    return out


def unimag(base: Any, view: Any) -> Any:
    """The array a written ``np.imag(z)`` (``z.imag``) is a view of: ``z`` with the view as its
    imaginary parts. Of a real array, ``np.imag`` gives a read-only array: the write raises, as
    numpy's does."""
    if not np.iscomplexobj(base):
        raise ValueError("assignment destination is read-only")
    out = np.array(base, copy=True)
    out.imag = view
    return out


def unrotated(view: Any, k: Any = 1, axes: Any = (0, 1)) -> Any:
    """The array a written ``np.rot90(x, k, axes)`` is a view of: the view turned back."""
    return np.rot90(view, -k, axes)


def untransposed(view: Any, axes: Any = None) -> Any:
    """The array a written ``np.transpose(x, axes)`` (or ``x.T``) is a view of: the view's axes put
    back."""
    return np.transpose(view, inverse_axes(axes))


def slots_holding(container: Any, old: Any, where: Any, name: Any = None, plan: Any = None) -> Any:
    """The slots of ``container`` (a list, tuple or dict) that hold the object ``old``, which a
    write changes: after ``pair[0][1] = v`` on ``pair = [y, y]`` both hold the changed array
    (``replaced``). Where ``old`` is also inside another slot (deeper, or an array sharing its
    memory), which entries that one sees is not known here: refused, naming the container (``name``;
    no gradient: positions), unless ``plan`` (``runtime.shared``'s) makes those slots again. A
    name that holds no container (yet: ``None``) holds it nowhere, and an
    object no write changes in place (a number: ``xs[0] += v`` puts a new one in one slot) is in
    none. A tuple is such an object too: a write into an item it holds leaves it the same tuple,
    holding the changed item, in every slot that holds it (``pairs[0][1][0] = v`` on ``pairs =
    [(a, b)]``)."""
    if is_array(container) and is_array(old):
        # ``a, b = m`` of an array: ``b`` is a view of ``m``'s row, whose write Python's ``m``
        # sees (no slot of a list to put it back into): refused, naming ``m``
        check_in_place(old, [container], where, name)
        return ()
    if not isinstance(container, (list, tuple, dict)) or not (
        is_array(old) or isinstance(old, (list, dict, tuple))
    ):
        return ()
    slots = _slots(container)
    deeper = f"{name}, in a slot inside it" if name else None
    if plan is None or plan.root is None:
        # (with a ``runtime.shared`` plan, the slots that share memory with ``old`` are made
        # again from where their entries lie, after the write)
        check_in_place(old, [container[k] for k in slots if container[k] is not old], where,
                       deeper)
    return tuple(k for k in slots if container[k] is old)


def slots_changed(container: Any, key: Any, old: Any, where: Any, name: Any = None) -> Any:
    """The slots of ``container`` that ``container[key] += v`` changes: where the item ``old`` is an
    array, list or dict (which ``+=`` changes in place), every slot holding it (``slots_holding``);
    for a number (which ``+=`` replaces), the slot ``key`` alone. A tuple's item raises Python's
    error (after changing the item, which the error leaves unread)."""
    if isinstance(container, tuple):
        raise TypeError(f"{where}: 'tuple' object does not support item assignment")
    if is_array(old) or isinstance(old, (list, dict)):
        return slots_holding(container, old, where, name)
    return (key,)


def augmented(old: Any, new: Any) -> Any:
    """What ``xs[k] += v`` leaves in the slot (and wherever else its object is): an array changed in
    place, with ``new``'s entries in its own shape and dtype (``augmented_value``); anything else (a
    number, a list extended), ``new``. (Another library's array: its entries written in, by
    ``assign_item``.)"""
    if isinstance(old, np.ndarray):
        return augmented_value(new, old)
    return assign_item(old, Ellipsis, new) if is_array(old) else new


def augmented_value(new: Any, old: Any) -> Any:
    """What ``y op= v`` leaves in ``y``, given ``new = y op v``: where ``old`` is a numpy array,
    which Python's ``op=`` changes in place, ``new``'s entries in ``old``'s shape and dtype, cast as
    numpy's ``same_kind`` rule allows (``y += 0.5`` on integers raises numpy's ``TypeError``, a
    float32 ``y`` keeps float32; ``new`` of another shape raises numpy's ``ValueError``, leading
    ones too, as a read-only ``y`` does); anything else (a number, which ``op=`` rebinds), ``new``
    itself.

    Where ``new`` already has ``old``'s dtype, shape and layout, and ``old`` may be written,
    that is ``new`` itself (an operator's result, which nothing else holds), with no copy."""
    if not isinstance(old, np.ndarray):
        return new
    if type(new) is type(old) and new.dtype == old.dtype and new.shape == old.shape \
            and new.strides == old.strides and old.flags.writeable:
        return new
    if not np.can_cast(np.result_type(new), old.dtype, casting="same_kind"):
        raise TypeError(f"Cannot cast ufunc output from {np.result_type(new)!r} to {old.dtype!r} "
                        "with casting rule 'same_kind'")
    if not old.flags.writeable:
        raise ValueError("output array is read-only")
    if np.shape(new) != old.shape:
        raise ValueError(f"non-broadcastable output operand with shape {old.shape} doesn't match "
                         f"the broadcast shape {np.shape(new)}")
    out = np.empty_like(old)
    out[...] = new
    return out


def augmented_vjp(g: Any, ans: Any, old: Any, new: Any) -> Any:
    """The adjoint of ``new`` in ``augmented``: the written entries' (summed to its shape), or ``g``
    itself."""
    return assign_item_vjp_value(g, ans, Ellipsis, new) if is_array(old) else g


def replaced(container: Any, slots: Any, new: Any) -> Any:
    """``container`` with ``new`` in each of ``slots`` (a new list, tuple or dict; with no slots,
    ``container`` itself, so that a container that did not hold the changed object stays the object
    it was)."""
    if not slots:
        return container
    if isinstance(container, dict):
        return {k: (new if k in slots else v) for k, v in container.items()}
    values = [new if k in slots else v for k, v in enumerate(container)]
    return (
        values
        if isinstance(container, list)
        else type(container)(*values)
        if hasattr(container, "_fields")
        else tuple(values)
    )


def replaced_vjp_container(g: Any, container: Any, slots: Any) -> Any:
    """The adjoint (or tangent) of the container in ``replaced``: the replaced slots take none."""
    if g is None or isinstance(g, float):
        return g
    if isinstance(container, dict):
        return {k: (zeros_like(container[k]) if k in slots else g[k]) for k in container}
    values = [zeros_like(container[k]) if k in slots else g[k] for k in range(len(container))]
    return values if isinstance(g, list) else tuple(values)


def replaced_vjp_new(g: Any, new: Any, slots: Any) -> Any:
    """The adjoint of the new object in ``replaced``: the sum of the adjoints of the slots it went
    into."""
    if g is None or isinstance(g, float):
        return zeros_like(new)
    total: Any = zeros_like(new)
    for k in slots:
        if g[k] is not None:
            # (element by element: ``+`` would join two lists, the adjoints of a list put back)
            total = add_adjoints(total, g[k])
    return total


def replaced_jvp_new(u: Any, container: Any, slots: Any) -> Any:
    """The tangent of ``replaced`` along the new object's: ``u`` in the replaced slots, zeros
    elsewhere."""
    if not slots:
        return zeros_like(container)  # (no slot took it: the container itself)
    if isinstance(container, dict):
        return {k: (u if k in slots else zeros_like(container[k])) for k in container}
    values = [u if k in slots else zeros_like(container[k]) for k in range(len(container))]
    return values if isinstance(container, list) else tuple(values)
