"""Arrays that share memory in a way no recipe describes, followed through a write by where their
entries lie in memory.

``parts = np.split(y, 2); parts[0][1] = v`` changes ``y``, and ``parts[1]`` stays a view of ``y``
that sees its later writes. The memory model (``frontend.aliasing``) follows a view by the call
that made it where it knows that call (``w = y[1:]`` is made again as ``y[1:]``); where it does not
(the items of a list of views, a view another slot holds too, the rows an unpacking read), it asks
here, at run time, before the write:

    plan = shared_family(atom, (y,), (parts,), where, names)    # which of them share memory
    ...the write: new = assign_item(atom, 1, v)
    root = memory_root(plan, new, (y,))          # the array holding all of them, written
    y = memory_view(plan, 0, root, y)            # each made again from it, as a view of it
    parts = memory_view(plan, 1, root, parts)

``shared_family`` finds the array among them whose entries hold every other's (the root), and the
flat position in it of each entry of each of the others (``_memory_positions``, read off their
addresses as numpy lays them out). ``memory_root`` is the root with the written entries put back at
their positions, a new array in C order; ``memory_view`` makes each of the others again from it as a
real view (``np.ndarray`` over the root's memory, at the same positions), so that a later write
through either is seen by the other as in Python. Both are linear in the arrays they take, and their
derivatives move entries between the same positions (``take_at``, ``scatter_at``).

Where no one array holds all the others' entries, a view's positions are not a strided layout of
the root, the dtypes differ or an array repeats an entry (``np.broadcast_to``'s), the write is
refused as before, naming the other variables (``check_in_place``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ast_ad.runtime.arrays import add_adjoints, is_array, zeros_like
from ast_ad.runtime.checks import check_in_place
from ast_ad.runtime.writes import _slots, scatter_add


class Plan:
    """What ``shared_family`` found: ``root`` (the index of the array that holds the others'
    entries among the family, ``-1`` for the written array itself, ``None`` where nothing is
    shared), ``atom`` (the written array's positions in the root) and ``entries`` (for each other
    variable: ``None`` where it shares nothing, ``"root"`` where it is the root, ``"atom"`` where it
    is the written array itself, an array of positions where it is a view of the root, or for a
    container a dict of its slots' entries, in turn)."""

    __slots__ = ("root", "atom", "entries", "made")

    def __init__(self, root: int | None, atom: Any, entries: tuple[Any, ...]) -> None:
        self.root, self.atom, self.entries = root, atom, entries
        # the object each old one was made again as, from which root: two variables of one object
        # stay one
        self.made: dict[int, tuple[Any, Any, Any]] = {}

    def __repr__(self) -> str:
        return f"Plan(root={self.root})"


def _strided_grid(shape: tuple[int, ...], start: int, steps: tuple[int, ...]) -> Any:
    """``start + Σ i_k steps_k`` at each index of ``shape``: the addresses of an array's entries
    (its strides for steps), or a strided layout of positions."""
    total = np.full(shape, start, dtype=np.int64)
    for axis, step in enumerate(steps):
        along = [1] * len(shape)
        along[axis] = shape[axis]
        total = total + np.arange(shape[axis], dtype=np.int64).reshape(along) * step
    return total


def _memory_addresses(a: np.ndarray) -> Any:
    """The address in memory of each entry of ``a``, in ``a``'s shape."""
    return _strided_grid(a.shape, a.__array_interface__["data"][0], a.strides)


def _root_index(root: np.ndarray) -> tuple[Any, Any] | None:
    """The root's entries' addresses (flat, C order) and the order that sorts them, found once
    for every array placed in it; ``None`` where two entries lie at one address
    (``np.broadcast_to``'s, windows ``as_strided`` makes that overlap)."""
    addresses = np.ravel(_memory_addresses(root))
    order = np.argsort(addresses, kind="stable")
    ordered = addresses[order]
    return None if bool(np.any(ordered[1:] == ordered[:-1])) else (addresses, order)


def _memory_positions(view: np.ndarray, root: np.ndarray, index: tuple[Any, Any]) -> Any:
    """The flat position (C order) in ``root`` of each entry of ``view``, in ``view``'s shape, or
    ``None`` where an entry of ``view`` is not an entry of ``root`` or the layout is not a strided
    one of the root's positions (no view could be made again from them). ``index``: the root's
    ``_root_index``."""
    if view.dtype != root.dtype:
        return None
    if view.size == 0:
        return np.zeros(view.shape, dtype=np.int64)
    mine = _memory_addresses(view)
    theirs, order = index
    found = np.minimum(np.searchsorted(theirs, mine, sorter=order), theirs.size - 1)
    where = order[found]
    if not np.array_equal(theirs[where], mine):
        return None
    return where if _is_strided(where) else None


def _is_strided(positions: Any) -> bool:
    """Whether ``positions`` are ``start + Σ i_k s_k``: a view's layout over a C-order array."""
    layout = _strided_grid(positions.shape, positions.flat[0], _position_steps(positions))
    return bool(np.array_equal(layout, positions))


def _position_steps(positions: Any) -> tuple[int, ...]:
    """The step in the root's flat positions along each axis of a view."""
    steps = []
    for axis in range(positions.ndim):
        if positions.shape[axis] < 2:
            steps.append(0)
            continue
        at = [0] * positions.ndim
        after = list(at)
        after[axis] = 1
        steps.append(int(positions[tuple(after)] - positions[tuple(at)]))
    return tuple(steps)


def shared_family(atom: Any, others: Any, where: Any, names: Any = None) -> Any:
    """Before a write into the array ``atom``: how each of ``others`` (the objects other variables
    hold: arrays, and lists, tuples and dicts whose slots may hold views) shares its memory (a
    ``Plan``). Refused where a write through ``atom`` would change what cannot be made again from
    one array holding them all (``names``: the other variables, for the message)."""
    if isinstance(atom, (list, dict, tuple)):
        return _holders(atom, others, where, names)
    if not isinstance(atom, np.ndarray) or not atom.size or not atom.flags.writeable:
        # (a write numpy refuses, or nothing to follow: checked as before)
        check_in_place(atom, others, where, names)
        return Plan(None, None, ())
    candidates: list[np.ndarray] = [atom]
    for obj in others:
        candidates += _collect(obj, (), atom, where, names)
    # the arrays that share memory with the written one, through each other
    members = [atom]
    rest = [c for c in candidates[1:] if c is not atom]
    grown = True
    while grown:
        grown = False
        for c in list(rest):
            if any(np.may_share_memory(c, m) for m in members):
                members.append(c)
                rest = [r for r in rest if r is not c]
                grown = True
    held = any(c is atom for c in candidates[1:])
    if len(members) == 1 and not held:
        return Plan(None, None, tuple(None for _ in others))
    root = max(members, key=lambda m: m.size)
    found = _root_index(root)
    placed: dict[int, Any] = {}
    if found is not None:
        for m in members:
            if id(m) not in placed:
                placed[id(m)] = _memory_positions(m, root, found)
    atom_positions = placed.get(id(atom))
    # (no entry of the root at two addresses, every entry placed, and the written array's each at
    # a place of its own)
    if atom_positions is None or any(p is None for p in placed.values()) \
            or np.unique(atom_positions).size != atom_positions.size:
        _refuse_shared(atom, where, names)
    entries = [_entry_in(obj, root, atom, placed, members) for obj in others]
    index = -1 if root is atom else next(
        (k for k, obj in enumerate(others) if obj is root), None
    )
    if index is None:
        # the array holding them all is held by no variable but in a slot: not followed here
        _refuse_shared(atom, where, names)
    return Plan(index, atom_positions, tuple(entries))


def _collect(obj: Any, path: tuple[int, ...], atom: Any, where: Any, names: Any) -> list[Any]:
    """The arrays in ``obj`` (itself, or in its slots at any depth); a container that holds
    itself, or another library's array, refused."""
    if isinstance(obj, np.ndarray):
        return [obj]
    if isinstance(obj, (list, tuple, dict)):
        if id(obj) in path:
            _refuse_shared(atom, where, names)
        return [found for k in _slots(obj)
                for found in _collect(obj[k], (*path, id(obj)), atom, where, names)]
    if is_array(obj):
        check_in_place(atom, [obj], where, names)
    return []


def _entry_in(obj: Any, root: Any, atom: Any, placed: dict[int, Any], members: list[Any]) -> Any:
    """The plan's entry of ``obj``: ``"root"``, ``"atom"``, its positions in the root, or
    ``None`` (an array that shares nothing, or not an array); of a container, its slots' entries
    that are not ``None``, or ``None`` (``_collect`` refused a container that holds itself)."""
    if isinstance(obj, (list, tuple, dict)):
        slots = {k: _entry_in(obj[k], root, atom, placed, members) for k in _slots(obj)}
        return {k: e for k, e in slots.items() if e is not None} or None
    if obj is root:
        return "root"
    if obj is atom:
        return "atom"  # (the written array itself: one object again after the write)
    if isinstance(obj, np.ndarray) and any(obj is m for m in members):
        return placed.get(id(obj))
    return None


def _holders(atom: Any, others: Any, where: Any, names: Any) -> Any:
    """The plan of a write into a list, tuple or dict (``box[1][0] = v``, the list ``box[1]``
    changed): it shares no memory, and every slot that holds it, at any depth, holds it after the
    write too (the root: the new object)."""
    entries = tuple(_holder_entry(obj, (), atom, where, names) for obj in others)
    if not any(e is not None for e in entries):
        return Plan(None, None, tuple(None for _ in others))
    return Plan(-1, "root", entries)


def _holder_entry(obj: Any, path: tuple[int, ...], atom: Any, where: Any, names: Any) -> Any:
    """``"root"`` where ``obj`` is the written container; of a container, its slots' entries that
    are not ``None``, or ``None``; a container that holds itself refused."""
    if obj is atom:
        return "root"
    if isinstance(obj, (list, tuple, dict)):
        if id(obj) in path:
            _refuse_shared(atom, where, names)
        slots = {k: _holder_entry(obj[k], (*path, id(obj)), atom, where, names)
                 for k in _slots(obj)}
        return {k: e for k, e in slots.items() if e is not None} or None
    return None


def _refuse_shared(atom: Any, where: Any, names: Any) -> None:
    """Refuse the write as ``check_in_place`` does, naming the other variables: what they see of
    it cannot be made again from one array that holds them all."""
    check_in_place(atom, [atom], where, names)  # (raises: ``atom`` is among the others)
    raise AssertionError("check_in_place refuses an object among the others")


def memory_root(plan: Any, new: Any, family: Any) -> Any:
    """The root array after the write: the written array's new entries (``new``) at their
    positions, in a new array laid out in C order (the written array itself, where it is the
    root). Where nothing is shared, nothing (a zero, which no ``memory_view`` reads)."""
    if plan.root is None:
        return 0.0  # (read by no ``memory_view``)
    if plan.root == -1:
        return np.ascontiguousarray(new) if isinstance(new, np.ndarray) else new
    out = np.array(family[plan.root], order="C", copy=True)
    out.reshape(-1)[np.ravel(plan.atom)] = np.ravel(new)
    return out


def memory_view(plan: Any, key: int, root: Any, old: Any) -> Any:
    """The variable ``key`` (``-1``: the written one) after the write: ``old`` where it shares
    nothing, ``root`` where it is the root, else the view of ``root`` at its positions; a
    container, its slots that were views made again so."""
    if plan.root is None:
        return old
    entry = "atom" if key == -1 else plan.entries[key]
    if entry is None:
        return old
    if isinstance(entry, str):
        return root if entry == "root" or plan.root == -1 else _written_view(plan, root)
    return _again(plan, root, entry, old)


def _again(plan: Any, root: Any, entry: Any, old: Any) -> Any:
    """``old`` made again from ``root`` as ``entry`` says: the root, the written array, a view of
    the root, or a container with its slots so (one object for one old object: ``Plan.made``)."""
    if isinstance(entry, str):
        return root if entry == "root" or plan.root == -1 else _written_view(plan, root)
    made = plan.made.get(id(old))
    if made is not None and made[0] is old and made[1] is root:
        return made[2]
    if isinstance(entry, dict):
        new = _with_slots(old, {k: _again(plan, root, e, old[k]) for k, e in entry.items()})
    else:
        new = view_at(root, entry)
    plan.made[id(old)] = (old, root, new)
    return new


def _written_view(plan: Any, root: Any) -> Any:
    """The written array after the write, one object for every variable and slot that held it: the
    root, or its view at the written positions."""
    if plan.root == -1:
        return root
    made = plan.made.get(-1)
    if made is None or made[1] is not root:
        made = plan.made[-1] = (None, root, view_at(root, plan.atom))
    return made[2]


def _with_slots(container: Any, slots: dict[Any, Any]) -> Any:
    """``container`` (a list, tuple or dict) with ``slots`` put in."""
    if isinstance(container, dict):
        return {k: slots.get(k, v) for k, v in container.items()}
    values = [slots.get(k, v) for k, v in enumerate(container)]
    if isinstance(container, list):
        return values
    return type(container)(*values) if hasattr(container, "_fields") else tuple(values)


def view_at(root: Any, positions: Any) -> Any:
    """The entries of ``root`` at ``positions`` (flat, C order), in their shape: a real view of
    ``root``'s memory where ``root`` is an array in C order, else a new array of them."""
    if isinstance(root, np.ndarray) and root.flags.c_contiguous and positions.size:
        item = root.itemsize
        return np.ndarray(
            positions.shape, root.dtype, buffer=root, offset=int(positions.flat[0]) * item,
            strides=tuple(step * item for step in _position_steps(positions)),
        )
    return take_at(root, positions)


def take_at(root: Any, positions: Any) -> Any:
    """``root``'s entries at ``positions`` (flat, C order), a new array in their shape."""
    return np.reshape(np.ravel(root), (-1,))[positions]


def scatter_at(g: Any, positions: Any, like: Any) -> Any:
    """``g``'s entries added at ``positions`` into zeros of ``like``'s shape (the adjoint of
    ``take_at``)."""
    if isinstance(g, np.ndarray) and isinstance(like, (np.ndarray, float)):
        out = np.zeros(np.size(like), dtype=np.result_type(g, like))
        np.add.at(out, np.ravel(positions), np.ravel(g))
        return out.reshape(np.shape(like))
    # (another library's arrays: made by its own functions)
    flat = np.reshape(zeros_like(like) + zeros_like(np.reshape(g, (-1,))[:1])[0], (-1,))
    return np.reshape(scatter_add(flat, np.ravel(positions), np.reshape(g, (-1,))), np.shape(like))


def _no_adjoint(g: Any) -> bool:
    return g is None or (isinstance(g, float) and g == 0.0)


def memory_root_vjp_new(g: Any, plan: Any, new: Any) -> Any:
    """The adjoint of ``memory_root`` along ``new``: the root's adjoint at the written entries."""
    if _no_adjoint(g) or plan.root is None:
        return zeros_like(new)
    if plan.root == -1:
        return g
    return take_at(g, plan.atom)


def memory_root_vjp_family(g: Any, plan: Any, family: Any) -> Any:
    """The adjoint of ``memory_root`` along the family: the root's adjoint, with the written
    entries taken out, to the array that was the root; none to the others."""
    out = [zeros_like(obj) for obj in family]
    if _no_adjoint(g) or plan.root is None or plan.root == -1:
        return tuple(out)
    kept = np.array(g, copy=True, order="C")
    kept.reshape(-1)[np.ravel(plan.atom)] = 0
    out[plan.root] = kept.reshape(np.shape(family[plan.root]))
    return tuple(out)


def _place_of(plan: Any, entry: Any) -> Any:
    """An entry of ``plan`` as ``None`` (nothing shared), ``"root"`` or the positions in the
    root."""
    if isinstance(entry, str) and entry == "atom":
        return "root" if plan.root == -1 else plan.atom
    return entry


def _entry_of(plan: Any, key: int) -> Any:
    return None if plan.root is None else "atom" if key == -1 else plan.entries[key]


def memory_view_vjp_root(g: Any, plan: Any, key: int, root: Any) -> Any:
    """The adjoint of ``memory_view`` along the root: each entry of the view's adjoint added at
    its position."""
    entry = _entry_of(plan, key)
    if plan.root is None:
        return 0.0
    total: Any = zeros_like(root)
    if _no_adjoint(g) or entry is None:
        return total
    for part, e in _paired(g, entry):
        where = _place_of(plan, e)
        spread = part if isinstance(where, str) else scatter_at(part, where, root)
        total = add_adjoints(total, spread)
    return total


def _paired(g: Any, entry: Any) -> list[tuple[Any, Any]]:
    """The parts of the adjoint or tangent ``g`` (shaped as the variable) at the arrays ``entry``
    makes again, each with its own entry (a container's slots, in turn)."""
    if _no_adjoint(g) or entry is None:
        return []
    if isinstance(entry, dict):
        return [pair for k, e in entry.items() for pair in _paired(g[k], e)]
    return [(g, entry)]


def _emptied(g: Any, entry: Any, old: Any) -> Any:
    """``g`` (shaped as ``old``) with zeros at the arrays ``entry`` makes again."""
    if entry is None or _no_adjoint(g):
        return g
    if isinstance(entry, dict):
        return _with_slots(g, {k: _emptied(g[k], e, old[k]) for k, e in entry.items()})
    return zeros_like(old)


def _taken(u: Any, plan: Any, entry: Any, old: Any) -> Any:
    """Zeros shaped as ``old`` but at the arrays ``entry`` makes again, there the root's tangent
    ``u`` at their places."""
    if entry is None:
        return zeros_like(old)
    if isinstance(entry, dict):
        return _with_slots(zeros_like(old),
                           {k: _taken(u, plan, e, old[k]) for k, e in entry.items()})
    where = _place_of(plan, entry)
    return u if isinstance(where, str) else take_at(u, where)


def memory_view_vjp_old(g: Any, plan: Any, key: int, old: Any) -> Any:
    """The adjoint of ``memory_view`` along the old value: all of it where nothing is shared, none
    where it is made again from the root, a container's slots made again taking none."""
    return _emptied(g, _entry_of(plan, key), old)


def memory_root_jvp_new(u: Any, plan: Any, like: Any) -> Any:
    """The tangent of ``memory_root`` along ``new`` (and the transpose of ``memory_root_vjp_new``):
    ``u`` at the written entries of zeros shaped like the root (``like``)."""
    if plan.root is None:
        return 0.0
    if plan.root == -1:
        return u
    return scatter_at(u, plan.atom, like)


def memory_root_jvp_family(u: Any, plan: Any, new: Any) -> Any:
    """The tangent of ``memory_root`` along the family: the root's own tangent but at the written
    entries."""
    if plan.root is None:
        return 0.0
    if plan.root == -1:
        return zeros_like(new)
    kept = np.array(u[plan.root], copy=True, order="C")
    kept.reshape(-1)[np.ravel(plan.atom)] = 0
    return kept


def memory_view_jvp_root(u: Any, plan: Any, key: int, old: Any) -> Any:
    """The tangent of ``memory_view`` along the root: its entries at the view's positions (new
    arrays: a tangent shares no memory)."""
    return _taken(u, plan, _entry_of(plan, key), old)
