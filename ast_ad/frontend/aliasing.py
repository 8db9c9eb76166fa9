"""The memory model: which names may reach the same object, and what happens to them when it
changes.

Python's assignment binds a name, it does not copy: after ``y = x`` (or ``y = x[1:]``, ``y = x.T``,
``xs.append(x)``, ``m = Model(x)``) a write ``x[0] = 5.0`` is seen through ``y`` too. ast_ad's IR
computes every write as a new value, so before a write each live variable that may see the object is
asked at run time how it does (``runtime.view_of``), and made again from the new value after the
write::

    w = y[1:]                          w = y[1:]
    y[0] = 5.0         lowers to       seen = view_of(y, w, y[1:], False, 'model.py:2', 'w')
                                       y = assign_item(y, 0, 5.0)
                                       if seen == 1:        # the same object
                                           w = y
                                       elif seen == 2:      # the very view y[1:] of it
                                           w = y[1:]

What may share memory is decided here, once, by ``Memory``, a part of the normalizer
(``normalize.Lowerer``) that owns the relations between names as it lowers: copies and names of one
object (``share(..., alias=True)``), views (``registry.def_view``, with the call that made each,
``recipes``), the lists, tuples and dicts that hold an object (``holds``, ``packs``), the names a
loop binds again (``loop_shared``), a helper's arguments (``lower_calls.param_writes``) and the
attributes of the objects made here (``objects``). Where no call it knows relates the other variable
to the written array (a list of views, ``np.split``'s; a view in two slots; views made otherwise on
two paths), it asks where their entries lie in memory instead (``Memory.by_memory``,
``runtime.shared``): the one array that holds them all is written, and each variable made again as a
real view of it. Where neither can make the other variable again (a view of an array no variable
holds, a caller's list), the guard refuses at run time, naming it (``check_in_place``). Every pass
that moves where a value lives asks the model through the guards it writes (``registry.def_guard``,
read by ``analysis.guarded``): a loop writes its own copy of an array in place
(``analysis.in_place_writes``, both modes) only for an array no guard names, so that the questions
above are asked of the objects Python's run has.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from typing import Any

import gast
import numpy as np

from ast_ad import runtime
from ast_ad.analysis.activity import is_user_function
from ast_ad.core import registry
from ast_ad.core.records import record
from ast_ad.errors import LocatedError
from ast_ad.frontend.frame import Frame, Lowering, ReturnView, container_kind
from ast_ad.ir import nodes as ir
from ast_ad.ir import syntax


class Memory:
    """The memory model: what may share memory, as the normalizer lowers (a part of
    ``normalize.Lowerer``). It owns the relations between the names (``shares``, ``holds``,
    ``aliased``, ``recipes``...) and the checks to write after a statement (``follow_ups``), and
    receives the frame, the lowerer (to bind the names of the checks it writes) and the view a user
    function returns (``return_view``, which lowers that function)."""

    def __init__(self, at: Frame, lowering: Lowering, return_view: ReturnView) -> None:
        self.at, self.lowering = at, lowering
        self.return_view = return_view
        # what it owns: the relations between the names, the views and the checks to write
        # IR name -> IR names that may share its memory (copies, views)
        self.shares: dict[str, set[str]] = {}
        # a list or tuple's IR name -> IR names of the objects it holds
        self.holds: dict[str, set[str]] = {}
        self.held_by: dict[str, set[str]] = {}  # the same relation the other way round
        # statements the function starts with (``Memory.note_views``)
        self.presets: list[ir.Stmt] = []
        # a name bound by unpacking -> the list or tuple it was unpacked from
        self.unpacked: dict[str, str] = {}
        # a shallow copy's IR name -> (its source, a flag set where the source is a container: its
        # items are then the copy's too; ``Memory.note_views``)
        self.copied_from: dict[str, tuple[str, str]] = {}
        self.writes: set[str] = set()  # parameters whose values an in-place statement may change
        # (``Memory.guard_object`` refuses changing them)
        self.shared_defaults = _shared_defaults(at.source.fn)
        # see ``Memory.note_views``
        self.checked_only = _checked_only(at.source.tree, at.source.fn.__globals__)
        # IR name -> the view call that made it (``Memory.followed``)
        self.recipes: dict[str, ir.Call] = {}
        # a view bound on more than one path -> the name of ast_ad's its index is held in
        # (``held_index``)
        self.indices: dict[str, str] = {}
        # variables to make again after the statement (``Memory.follow``)
        self.follow_ups: list[FollowUp] = []
        # an item's object after a write (``Memory.follow``)
        self.changed_objects: dict[str, ir.Var] = {}
        # writes whose other variables are made again from where their entries lie
        # (``Memory.by_memory``)
        self.memory_ups: list[ByMemory] = []
        # IR name -> names of the same object (``Memory.share``)
        self.aliased: dict[str, set[str]] = {}
        # a literal container's IR name -> what it packed (``Memory.slot_of``)
        self.packs: dict[str, ir.Pack] = {}

    def guard_in_place(self, target: gast.expr, container: bool = False) -> None:
        """Before ``x += y`` or ``x[i] = v``: if another variable may share ``x``'s memory, check it
        at run time.

        Python changes the shared array in place; ast_ad computes a new array. Where sharing is
        possible (``y = x``, ``y = x[1:]``, ``y = x.T``...), the generated code checks and refuses
        rather than differ.
        """
        base = target.value if isinstance(target, gast.Subscript) else target
        if isinstance(base, gast.Name) and isinstance(self.at.env.get(base.id), ir.Var):
            local = self.local(base.id)
            pack = self.packs.get(local.name)
            if isinstance(target, gast.Subscript) and pack is not None \
                    and pack.kind in ("list", "dict"):
                # ``parts[1] = v`` on a list or dict written in the code puts a new object in the
                # slot: the list changes (the names that hold it follow), the objects it held
                # do not (a view of an argument in the old slot is not written)
                self.guard_object(local, base.id, container=True, follow=True, item=True)
                return
            self.guard_object(local, base.id, container, follow=not container,
                              item=isinstance(target, gast.Subscript))

    def guard_object(self, atom: ir.Var, owner: str, container: bool = False, follow: bool = False,
                     changed: str | None = None, item: bool = False) -> None:
        """Check at run time that no live variable but ``owner`` reaches the object ``atom``, about
        to change.

        A parameter it may reach is recorded in ``writes``: Python's caller would see the change
        too. ``container``: the change is to a list itself (``append``, ``pop``), which leaves the
        objects in it as they were, so what they share with other names does not matter.
        """
        related = self.reaching(atom.name, container)
        written = {self.at.params[name] for name in related if name in self.at.params}
        for param in sorted(written & self.shared_defaults):
            # Python keeps the change in the default object, and the next call starts from it; a
            # gradient's call computes with the default as it was made, so the two would part at the
            # next call
            raise LocatedError(
                f"this changes the default value of the parameter {param} in place: Python keeps "
                "the "
                "change for the function's next call, which ast_ad's derivatives do not follow; "
                "make "
                f"the default None and make the value inside (if {param} is None: {param} = ...), "
                "or "
                f"change a copy ({param} = {param}.copy())",
                self.at.line.filename,
                self.at.line.lineno,
                self.at.line.text,
            )
        self.writes |= written
        # in a loop that may bind ``owner`` and another name to one object later in its body, the
        # next step may find them shared although nothing before this statement says so: every name
        # that such a binding of the loop may reach is checked too. So where another name that
        # reaches the object is one such (``v3 = x0`` before the loop, ``v2 = x0`` late in it: the
        # next step's ``v3 += c`` changes what ``v2`` holds)
        reached = {owner} | {
            user for user, value in self.at.env.items()
            if isinstance(value, ir.Var) and value.name in related
        }
        if any(reached & names for names in self.at.loop_shared):
            for names in self.at.loop_shared:
                for name in names & self.at.env.keys():
                    shared = self.at.env[name]
                    if name != owner and isinstance(shared, ir.Var):
                        related = related | self.reaching(shared.name, container)
        # (each object once: two names of it are one variable to follow)
        others = list(dict.fromkeys(self.variables_in(related, owner)))
        every, start, ups = list(others), len(self.at.body), len(self.follow_ups)
        followed: list[ir.Var] = []
        # the variables that can be made again from the changed object are followed, not refused
        if follow:
            followed = [
                other
                for other in others
                if self.followed(atom, owner, other, changed or owner, item)
            ]
            others = [other for other in others if other not in followed]
        # a list changed itself (``ys.append(v)``): another name of the very list sees it
        elif container:
            others = [
                other
                for other in others
                if not (other == atom and self.followed(atom, owner, other, changed or owner, True))
            ]
        # (a container that holds containers may hold the written object twice, or deeper than
        # its slot: ``box = [y, [y]]``, which ``slots_holding`` refuses; made again from where the
        # entries lie instead)
        by_memory = False
        if follow and not container:
            deep = any(self.holds_containers(other) for other in every)
            through_slot = changed not in (None, owner)
            nested = through_slot and (deep or self.holds_containers(self.at.env.get(owner))) \
                or self.container_like(atom) and deep
            # (and a list or dict changed in its slot, which a container holds deeper:
            # ``inner[0] = v`` where ``deep = [[inner]]``)
            by_memory = (bool(others) or nested) \
                and (nested or not self.container_like(atom)) \
                and self.by_memory(atom, owner, every, changed, start, ups)
        if others and not by_memory:
            self.check_apart(atom, others)
        if container:
            # a change of a shallow copy itself (an append, a pop) leaves its source as it was
            return
        # a shallow copy's items are its source's where that is a container (``x.copy()`` of a list;
        # of an array they are numbers): checked under the flag the copy set, so that an array's
        # copy costs no check
        for name in sorted(related & self.copied_from.keys()):
            source, flag = self.copied_from[name]
            items = [other for other in self.variables_in(self.reaching(source, False), owner)
                     if other not in others and other not in followed]
            # (a list or dict the copy was made of holds the written object: made again with it)
            if follow:
                items = [
                    other
                    for other in items
                    if not self.followed(atom, owner, other, changed or owner, item)
                ]
            if items:
                self.check_apart(atom, items, ir.Var(flag))

    def followed(self, atom: ir.Var, owner: str, other: ir.Var, changed: str, item: bool) -> bool:
        """Before ``owner``'s object (``atom``) changes in place: if the live variable holding
        ``other`` may see it as Python does, as the same object or as a view whose making is known,
        ask at run time which it is (``runtime.view_of``: the same, a view, apart, or refused), to
        make it again after the change (``follow``). ``False`` where it cannot be followed: it is
        then checked and refused if shared.

        The fact this relies on: a view read again from the changed array is the view Python's write
        leaves, as ``view_of`` proves at run time that the variable is that very view (same memory,
        same layout)."""
        users = self.users_of(other, owner)
        if other.name in self.at.field_labels and not users:
            # an attribute of an object made here: a variable the lowering may assign
            users = [other.name]
        if not users:
            return False
        if item and self.unpacked.get(atom.name) == other.name and other.name not in self.packs \
                and self.at.kinds.get(other.name) is None and other.name not in self.copied_from:
            # (``a, b = m`` of what may be an array: ``b`` a view of its row, made again with ``m``
            # and its other rows from where their entries lie, ``by_memory``)
            return False
        if item and self.holds_views_of(other, atom):
            # (its slots may be views of the written array, which ``slots_holding`` cannot put
            # back: made again from where their entries lie, ``by_memory``)
            return False
        if (
            item
            and self.container_like(other)
            and other.name not in self.at.params
            and other.name not in self.aliases(atom.name)
            and self.mutable_or_top(users)
            and (changed != owner or self.array_like(atom) and self.slot_of(other, atom) is None)
            and self.may_hold(other, atom)
        ):
            # ``ys = list(xs); ys[0][i] = v`` (or ``pair = [y, y]; y[0] = v``): the list ``xs``
            # (under each of its names) holds that object too, in the slots it has at run time
            # (``slots_holding``, which refuses where a slot reaches it deeper); each takes the new
            # object. The slots are found before the write, while ``atom`` is the object as it was
            # (a write in a loop binds its name again)
            where = ir.Const(self.at.line.where())
            slots = self.lowering.bind(
                ir.Call(ir.Ref(runtime.slots_holding, "slots_holding"),
                        (other, atom, where, ir.Const(_shown(users[0])))),
                "slots",
            )
            twins = self.twins_of(changed, other)
            self.follow_ups.append(
                FollowUp(
                    changed,
                    users[0],
                    None,
                    None,
                    False,
                    False,
                    other,
                    twins,
                    held=slots,
                    names=tuple(users[1:]),
                )
            )
            return True
        if len(users) != 1 and other != atom:
            return False
        # (several names of the very object written through another, ``z = y; a = y; a *= 2.0``:
        # the first is followed, the others take its new value: ``names``)
        user, names = users[0], tuple(users[1:])
        if (self.at.nesting or self.at.loops) and any(
            not self.is_mutable(u) and u not in self.at.field_labels for u in users
        ):
            return False  # bound outside the branch or loop, and not prepared to change in it
        probe: ir.Atom = ir.Const(None)
        inverse, identity = False, True
        same = self.aliases(atom.name)
        # ``w = y[1:]``: after the change, ``w`` is that view of ``y``
        made = self.recipes.get(other.name)
        # ``w = y[1:]; w[0] = v``: ``y`` has ``v`` at ``[1:][0]``
        mine = self.recipes.get(atom.name)
        form: ir.Call | None = None
        if not names and self.sibling_view(atom, other, user, made, mine, same):
            return True
        via = self.views_between(made, same)
        if via is not None and made is not None:
            # ``w = y.T[1:]``: a view of a view of the changed array, each made again in turn
            form = made
            probe = atom
            # (each through ``view_probe``: where the changed name holds no array at run time, a
            # number a branch or a loop bound it to, there is no such view: ``None``, not an error)
            for inner in (*via, made):
                probe = self.lowering.bind(
                    ir.Call(_PROBE, (probe, inner.fn, *inner.args[1:]), inner.kwargs), "probe",
                    holds=False,
                )
        elif (
            mine is not None
            and mine.args
            and isinstance(mine.args[0], ir.Var)
            and mine.args[0].name in self.aliases(other.name)
            and (
                (mine.fn.obj is operator.getitem or registry.view_inverse(mine.fn.obj))
                and self.array_like(other)
                or mine.fn.obj in (operator.getitem, runtime.list_item)
                and other.name in self.holds
            )
        ):
            # (a view of an array, written into it; or the object a list, tuple or dict holds, put
            # back)
            form, inverse = mine, True
            identity = other.name not in self.holds  # (a container is not the object it holds)
            probe = self.lowering.bind(
                ir.Call(_PROBE, (other, mine.fn, *mine.args[1:]), mine.kwargs), "probe", holds=False
            )
        elif (
            mine is not None
            and self.array_like(other)
            and (mine.fn.obj is operator.getitem or registry.view_inverse(mine.fn.obj))
            and (via := self.views_between(mine, self.aliases(other.name)))
            and all(v.fn.obj is operator.getitem or registry.view_inverse(v.fn.obj) for v in via)
        ):
            # ``w = y.T[1:]; w[0, 2] = v``: the written view of a view of ``other``, its entries put
            # back through each view in turn
            form, inverse = mine, True
            probe = other
            for inner in (*via, mine):
                probe = self.lowering.bind(
                    ir.Call(_PROBE, (probe, inner.fn, *inner.args[1:]), inner.kwargs), "probe",
                    holds=False,
                )
        # ``other = [y]``: put ``y`` back in its slot
        elif (slot := self.slot_of(other, atom)) is not None:
            form, inverse, identity = (
                ir.Call(ir.Ref(operator.getitem, "operator.getitem"), (other, slot)),
                True,
                False,
            )
            probe = self.lowering.bind(
                ir.Call(_PROBE, (other, form.fn, *form.args[1:])), "probe", holds=False
            )
        elif (
            other.name not in same
            and not (
                mine is not None
                and mine.args
                and isinstance(mine.args[0], ir.Var)
                and (changed != owner or mine.fn.obj in (operator.getitem, runtime.list_item))
                and other.name in self.held_within(mine.args[0])
            )
            and not any(
                owner in names and other.name in self.loop_reach(names)
                for names in self.at.loop_rebinds
            )
        ):
            # neither the same object, a view of it, the object a container holds that an item read
            # may be (``v1 = sorted([v0])[0]``: asked), nor two names a loop may bind to one object
            # in an earlier step (``y += d; y = kept``: asked at each step)
            return False
        if other == atom and item:
            # the very object (``v = x``), changed in place (``x[i] = ...``, which a number would
            # refuse; ``x += d`` on a number binds a new one, which ``view_of`` tells apart)
            self.follow_ups.append(FollowUp(changed, user, None, None, False, True, names=names))
            return True
        seen = self.seen(atom, other, probe, inverse, user)
        # another variable followed for this write may be the very same object (``z = y``, both
        # seeing the row written): made again, it must stay one object, so it takes the other's new
        # value
        twins = self.twins_of(changed, other)
        self.follow_ups.append(
            FollowUp(changed, user, seen, form, inverse, identity, other, twins, via=via or (),
                     names=names)
        )
        return True

    def by_memory(self, atom: ir.Var, owner: str, others: list[ir.Var], changed: str | None,
                  start: int, ups: int) -> bool:
        """Before a write into ``atom``, an array that ``others`` may see in a way no recipe says
        (the items of a list of views, ``np.split``'s; a view in two slots or deeper in another;
        rows an unpacking read; views made otherwise on two paths; a name a loop binds late to
        the written array): instead of the follow-ups just written for them (the statements from
        ``start``, the follow-ups from ``ups``, dropped), ask at run time which of them share
        memory with it (``runtime.shared_family``), and after the write make each again from the
        array that holds them all (``memory_root``, ``memory_view``: ``follow``). ``False`` where
        that cannot be done here (another variable is an attribute, a parameter, a name only its
        loop binds, or a name the block cannot bind again): the write is then checked as before.

        The fact this relies on: an entry of an array is one place in memory, so what a write
        changes in each of them, and which of them are views of which, is read off where their
        entries lie; each is made again as a view of the new root at the same places, so that
        they share memory afterwards as in Python; a list, tuple or dict that held the written
        object holds the new one in the same slots."""
        made = self.recipes.get(atom.name)
        if made is not None and registry.returns_sequence(made.fn.obj) \
                or owner not in self.at.env \
                or owner not in self.at.locals \
                or any(owner in targets for targets in self.at.loop_targets):
            return False
        # a write through a slot of the container ``owner`` (``parts[0][1] = v``), or into the
        # array ``owner`` holds (``second[0] = v``, ``v3 += c``: ``direct``)
        mine = self.at.env[owner]
        direct = changed in (None, owner)
        if not isinstance(mine, ir.Var) or mine.name in self.at.params \
                or atom.name in self.at.params:
            return False
        entries: list[tuple[ir.Var, list[str]]] = [] if direct else [(mine, [owner])]
        for other in others:
            users = self.users_of(other, owner)
            if not users or other.name in self.at.field_labels or other.name in self.at.params:
                return False  # (a caller's object: Python's caller would see the write)
            if any(u in targets for u in users for targets in self.at.loop_targets):
                return False  # (a name only its loop binds: ``for row in m``)
            entries.append((other, users))
        if not self.mutable_or_top([owner, *(u for _, us in entries for u in us)]):
            return False
        del self.at.body[start:]
        del self.follow_ups[ups:]
        pack = self.lowering.bind(ir.Pack(tuple(v for v, _ in entries)), "shared", holds=False)
        names = ", ".join(dict.fromkeys(_shown(us[0]) for _, us in entries))
        plan = self.lowering.bind(
            ir.Call(ir.Ref(runtime.shared_family, "shared_family"),
                    (atom, pack, ir.Const(self.at.line.where()), ir.Const(names))),
            "plan",
        )
        self.memory_ups.append(ByMemory(
            changed or owner, owner if direct else None, plan, pack,
            tuple((k, tuple(us)) for k, (_, us) in enumerate(entries)),
        ))
        return True

    def users_of(self, other: ir.Var, owner: str) -> list[str]:
        """The user's variables, but ``owner``, that hold ``other`` (not a function defined
        here)."""
        return [name for name, held in self.at.env.items() if held == other and name != owner
                and name in self.at.locals and name not in self.at.local_functions]

    def plan_of(self, changed: str) -> ir.Var | None:
        """The plan ``runtime.shared`` gave before the write that changes ``changed`` (an item's
        key), where that write is followed by where the entries lie (``by_memory``); else
        ``None``."""
        return next((up.plan for up in self.memory_ups if up.changed == changed), None)

    def follow_by_memory(self, up: ByMemory, new: ir.Var) -> None:
        """After the write: the root of the arrays that share memory with the written one, and
        each variable of ``up`` made again from it (``by_memory``)."""
        root = self.lowering.bind(
            ir.Call(ir.Ref(runtime.memory_root, "memory_root"), (up.plan, new, up.pack)), "root"
        )
        made = [(ir.Const(key), users) for key, users in up.entries]
        if up.direct is not None:
            made.append((ir.Const(-1), (up.direct,)))
        for key, users in made:
            old = self.at.env[users[0]]
            value = ir.Call(ir.Ref(runtime.memory_view, "memory_view"), (up.plan, key, root, old))
            if self.is_mutable(users[0]):
                target = self.local(users[0])
                self.at.body.append(ir.Assign(target.name, value, self.at.line))
            else:
                target = self.lowering.bind(value, users[0], user=True)
                self.at.env[users[0]] = target
                self.carry(users[0])
            # (a view of the root, or the root itself; what it held, it may hold still)
            self.share(target.name, root.name)
            if isinstance(old, ir.Var):
                self.share(target.name, old.name)
                for item in self.holds.get(old.name, set()):
                    self.contain(target.name, item)
            for name in users[1:]:
                self.rebind_name(name, target)

    def put_back(self, recipe: ir.Call, old: ir.Atom, new: ir.Atom) -> ir.Call:
        """``old`` (a base before a write), with ``new`` (its view ``recipe`` made, then written)
        put back where that view reads it (``def_view_inverse``; an index: ``assign_item``)."""
        inverse = registry.view_inverse(recipe.fn.obj)
        if inverse is None:
            return ir.Call(ir.Ref(runtime.assign_item, "assign_item"), (old, recipe.args[1], new))
        fn, takes_base = inverse
        rest = recipe.args[1:]
        return ir.Call(ir.Ref(fn, getattr(fn, "__name__", "inverse")),
                       (old, new, *rest) if takes_base else (new, *rest))

    def views_between(self, made: ir.Call | None, same: set[str]) -> tuple[ir.Call, ...] | None:
        """The views, outermost last, by which ``made`` (a variable's recipe, ``w = t[1:]``) reaches
        an array in ``same`` (the changed object's names): ``()`` where its base is one of them,
        ``(t = y.T,)`` where ``t``'s recipe reaches one (at most four deep); ``None`` where it does
        not reach one."""
        if made is None or not made.args:
            return None
        names = [ir.Var(n) for n in same]
        via: list[ir.Call] = []
        base = made.args[0]
        while base not in names:
            inner = self.recipes.get(base.name) if isinstance(base, ir.Var) else None
            if inner is None or not inner.args or len(via) == 4 or not (
                inner.fn.obj is operator.getitem or registry.returns_view(inner.fn.obj)
            ):
                return None
            via.insert(0, inner)
            base = inner.args[0]
        return tuple(via) if self.array_like(base) else None

    def seen(self, atom: ir.Var, other: ir.Var, probe: ir.Atom, inverse: bool, user: str) -> ir.Var:
        """Asked at run time, before the write: how ``other`` sees ``atom``'s object (the same, the
        view ``probe`` describes, apart; any other overlap refused, naming ``user``:
        ``runtime.view_of``)."""
        return self.lowering.bind(
            ir.Call(
                ir.Ref(runtime.view_of, "view_of"),
                (atom, other, probe, ir.Const(inverse), ir.Const(self.at.line.where()),
                 ir.Const(_shown(user))),
            ),
            "seen",
        )

    def sibling_view(self, atom: ir.Var, other: ir.Var, user: str, made: ir.Call | None,
                     mine: ir.Call | None, same: set[str]) -> bool:
        """``z = y[:]; w = y[1:]; z[0] = v``: ``other`` (``w``) is a view of the base that the
        written view ``atom`` (``z``) was made from, a base this write changes through ``atom`` (it
        is followed as ``atom``'s base, its entries put back). Asked before the write whether
        ``other`` is that view of the base (``view_of``), and made again from the base's new value
        after it (a follow-up chained to the base's own: ``FollowUp.chained``).

        The fact this relies on: the base's follow-up gives the base Python's value after the write
        (``atom``'s entries put back, ``def_view_inverse``), and a view read again from it is the
        view Python's write leaves, as ``view_of`` proves of the old base."""
        base = made.args[0] if made is not None and made.args else None
        if not (
            made is not None
            and mine is not None
            and mine.args
            and isinstance(base, ir.Var)
            and other.name not in same
            and self.array_like(base)
            and (mine.fn.obj is operator.getitem or registry.view_inverse(mine.fn.obj))
            and (made.fn.obj is operator.getitem or registry.returns_view(made.fn.obj))
            # ``atom`` is a view of ``base``, directly or through other views (``t = y.T``, then
            # ``w = t[1:]`` written: ``t`` is made again from the new ``y``, not ``w`` put back)
            and self.views_between(mine, {base.name}) is not None
        ):
            return False
        bases = [
            name
            for name, held in self.at.env.items()
            if held == base
            and name in self.at.locals
            and (self.at.live is None or name in self.at.live)
        ]
        if not bases:
            return False  # the base is no live variable's: nothing makes its new value
        probe = self.lowering.bind(
            ir.Call(_PROBE, (base, made.fn, *made.args[1:]), made.kwargs), "probe", holds=False
        )
        seen = self.seen(base, other, probe, False, user)
        self.follow_ups.append(
            FollowUp(bases[0], user, seen, made, False, True, other, chained=True)
        )
        return True

    def twins_of(self, changed: str, other: ir.Var) -> tuple[tuple[str, ir.Var], ...]:
        """The variables followed before for the change of ``changed``, each with whether ``other``
        is its very object (then ``other`` takes the value that variable is made again with, so the
        two stay one object)."""
        return tuple(
            (
                up.user,
                self.lowering.bind(
                    ir.Call(ir.Ref(runtime.is_same, "is_same"), (other, up.before)), "one_object"
                ),
            )
            for up in self.follow_ups
            if up.owner == changed and up.before is not None
        )

    def may_hold(self, container: ir.Var, atom: ir.Var) -> bool:
        """Whether the list, tuple or dict ``container`` may hold the object ``atom`` (at any
        depth): it holds a name of it, or one of the objects of the container ``atom`` was read from
        as an item (``ys[0]``, ``xs`` and its copy ``ys`` holding the same)."""
        held: set[str] = set()
        stack = [container.name]
        while stack:
            for name in self.holds.get(stack.pop(), set()) - held:
                held.add(name)
                stack.append(name)
        objects = self.aliases(atom.name)
        read = self.recipes.get(atom.name)
        if read is not None and read.fn.obj in (operator.getitem, runtime.list_item) and read.args \
                and isinstance(read.args[0], ir.Var):
            objects = objects | self.holds.get(read.args[0].name, set())
        return bool(held & objects)

    def holds_containers(self, container: ir.Atom | None) -> bool:
        """Whether ``container`` may hold lists, tuples or dicts that hold objects in turn
        (``[y, [y]]``, ``[(a, b)]``)."""
        return isinstance(container, ir.Var) and any(
            self.holds.get(name) for name in self.held_within(container)
        )

    def holds_views_of(self, container: ir.Var, atom: ir.Var) -> bool:
        """Whether the list, tuple or dict ``container`` may hold views of the array ``atom`` (a
        name of its object): the function that made it returns views of it (``np.split(y, 2)``),
        or an object it holds was made as one (``[y[:2], y[2:]]``)."""
        same = self.aliases(atom.name)
        made = self.recipes.get(container.name)
        if made is not None and registry.returns_sequence(made.fn.obj) \
                and self.views_between(made, same) is not None:
            return True  # (a list of views: ``np.split``'s)
        if not self.container_like(container):
            return False
        for name in self.held_within(container):
            recipe = self.recipes.get(name)
            if recipe is not None and recipe.args and (
                recipe.fn.obj is operator.getitem or registry.returns_view(recipe.fn.obj)
            ) and self.views_between(recipe, same) is not None:
                return True
        return False

    def held_within(self, container: ir.Var) -> set[str]:
        """The IR names of the objects the list, tuple or dict ``container`` may hold, at any depth,
        where it is an item read from another (``t = L[0]``, ``L[0][0]``): what the containers it
        was read from hold too, as the slot read may be any of theirs. An item written may be one
        of these; ``view_of`` tells at run time whether it is."""
        roots, name = [container.name], container.name
        while (read := self.recipes.get(name)) is not None and read.args \
                and read.fn.obj in (operator.getitem, runtime.list_item) \
                and isinstance(read.args[0], ir.Var) and read.args[0].name not in roots:
            name = read.args[0].name
            roots.append(name)
        held: set[str] = set()
        stack = list(roots)
        while stack:
            for item in self.holds.get(stack.pop(), set()) - held:
                held.add(item)
                stack.append(item)
        return held

    def mutable_or_top(self, users: list[str]) -> bool:
        """Whether the variables ``users`` can be bound again here: at the top level, or prepared
        for this block."""
        return not (self.at.nesting or self.at.loops) or all(
            self.is_mutable(user) for user in users
        )

    def container_like(self, atom: ir.Var) -> bool:
        """Whether ``atom`` is a list, tuple or dict the function made (its items may be objects
        written): not a copy of an array, which ``x.copy()`` may be (``copied_from``) unless it
        copied such a container."""
        seen: set[str] = set()
        name = atom.name
        while name in self.copied_from and name not in seen:
            seen.add(name)
            name = self.copied_from[name][0]
        return (
            name in self.holds or name in self.packs or self.at.kinds.get(name) in ("list", "tuple")
        )

    def loop_reach(self, names: set[str]) -> set[str]:
        """The IR names whose objects the user variables ``names`` (those a loop may bind to one
        object) reach."""
        found: set[str] = set()
        for name in names:
            atom = self.at.env.get(name)
            if isinstance(atom, ir.Var):
                found |= self.reaching(atom.name, False)
        return found

    def slot_of(self, container: ir.Var, item: ir.Var) -> ir.Const | None:
        """Where the list, tuple or dict literal ``container`` put ``item``, if in one slot only
        (``[y]``)."""
        pack = self.packs.get(container.name)
        if pack is None:
            return None
        slots = [pack.slot(k) for k, elt in enumerate(pack.elts) if elt == item]
        return ir.Const(slots[0]) if len(slots) == 1 else None

    def followed_value(self, user: str) -> ir.Var:
        """The variable that holds ``user``'s value after ``follow`` made it again (its own, or an
        attribute's)."""
        return ir.Var(user) if user in self.at.field_labels else self.local(user)

    def own_name(self, user: str, value: ir.Atom) -> ir.Var:
        """The name the variable ``user`` holds its value under, which a branch may assign: its own
        mutable name, or (at the function's top level) a new one, bound to ``value`` now."""
        if not self.is_mutable(user):
            name = self.at.namer.fresh(user, user=True)
            self.at.owner[name] = user
            self.at.mutable.add(name)
            self.at.body.append(ir.Assign(name, value, self.at.line))
            self.share(name, value.name, alias=True) if isinstance(value, ir.Var) else None
            self.at.env[user] = ir.Var(name)
            self.carry(user)
        return self.local(user)

    def carry(self, user: str) -> None:
        """Record that a write in place bound ``user`` again: where that happens in a function being
        inlined (a method that changes ``self.w``, which the caller's ``W`` is), the binding
        outlives the inlined body, whose own names are dropped when it ends (``Nesting.inline``)."""
        for frame in self.at.carried:
            frame[user] = self.at.env[user]

    def array_like(self, atom: ir.Atom) -> bool:
        """Whether ``atom`` may be an array, as far as the lowering knows: no list, tuple or dict it
        made."""
        return (
            isinstance(atom, ir.Var)
            and self.at.kinds.get(atom.name) is None
            and atom.name not in self.holds
        )

    def follow(self) -> None:
        """After a statement that changed objects in place: each variable that sees one, made again
        from it."""
        follow_ups, self.follow_ups = self.follow_ups, []
        # a view of a base that this change reaches through another view comes after the base's
        # own follow-up, which gives the base its new value (``sibling_view``)
        followed_users = {up.user for up in follow_ups if not up.chained}
        for up in follow_ups:
            if up.chained and up.owner not in followed_users:
                raise LocatedError(
                    f"this write changes {_shown(up.owner)} through a view of it, and "
                    f"{_shown(up.user)}, another view of {_shown(up.owner)}, with it; ast_ad "
                    f"cannot make {_shown(up.owner)} again here: write into {_shown(up.owner)} "
                    "itself",
                    self.at.line.filename,
                    self.at.line.lineno,
                    self.at.line.text,
                )
        follow_ups = [up for up in follow_ups if not up.chained] + [
            up for up in follow_ups if up.chained
        ]
        news = {
            up.owner: self.changed_objects.pop(up.owner)
            for up in follow_ups
            if up.owner in self.changed_objects
        }
        memory_ups, self.memory_ups = self.memory_ups, []
        for mem in memory_ups:
            if mem.changed in self.changed_objects:
                news[mem.changed] = self.changed_objects.pop(mem.changed)
        for up in follow_ups:
            changed = news.get(up.owner) or self.at.env.get(up.owner)
            if not isinstance(changed, ir.Var):
                continue
            # a container holding the changed object: each slot that held it, the new one
            if up.held is not None:
                self.refill(up, changed)
                continue
            self.follow_one(up, changed)
            for name in up.names:  # its other names: the same object, made again the same
                self.rebind_name(name, self.at.env[up.user])
        # the outermost first: a container written (its slot holding the new object) before the
        # array written inside it, whose views are then made again in the new container's slots;
        # the other way, the container's new object, which holds the written array as a new one,
        # would replace those views (``[(y[1:], 1.0)]`` written twice through ``[0][0][0]``)
        for mem in reversed(memory_ups):
            new = news.get(mem.changed) or self.at.env.get(mem.changed)
            if isinstance(new, ir.Var):
                self.follow_by_memory(mem, new)

    def rebind_name(self, name: str, value: ir.Atom) -> None:
        """``name``, another variable of an object a write changed, bound to ``value``, the object's
        new value: under its own mutable name where it has one; under a new one of its own where
        ``value`` is another variable's own mutable name, which a later binding of that variable
        changes (``v0 = x0; v1 = x0; v1 += c; x0 = 2.0``: ``v0`` is the written array still, not
        ``2.0``); else as ``value`` itself."""
        if self.is_mutable(name):
            self.at.body.append(ir.Assign(self.local(name).name, value, self.at.line))
        elif isinstance(value, ir.Var) and value.name in self.at.mutable \
                and self.at.owner.get(value.name) not in (None, name):
            self.own_name(name, value)
        else:
            self.at.env[name] = value
            self.carry(name)

    def follow_one(self, up: FollowUp, changed: ir.Var) -> None:
        """``up.user`` made again after ``changed``, the new value of the object ``up.owner``
        held, as ``runtime.view_of`` found it (the same object, a view of it, or apart)."""
        # the same object, certainly: the same value
        if up.seen is None and not self.is_mutable(up.user):
            self.at.env[up.user] = changed
            self.carry(up.user)
            return
        target = (
            ir.Var(up.user)
            if up.user in self.at.field_labels
            else self.own_name(up.user, self.at.env[up.user])
        )
        if up.seen is None:
            self.at.body.append(ir.Assign(target.name, changed, self.at.line))
            self.share(target.name, changed.name, alias=True)
            return
        if up.identity:
            same = self.lowering.bind(
                ir.Call(ir.Ref(operator.eq, "operator.eq"), (up.seen, ir.Const(1))), "same"
            )
        view: tuple[ir.Stmt, ...] = ()
        if up.form is not None:
            rewritten = up.inverse and up.identity and up.owner in self.at.env
            # (bound on every path)
            written = self.own_name(up.owner, changed) if rewritten else None
            start = len(self.at.body)
            is_view = self.lowering.bind(
                ir.Call(ir.Ref(operator.eq, "operator.eq"), (up.seen, ir.Const(2))), "is_view"
            )
            inverse = registry.view_inverse(up.form.fn.obj) if up.inverse else None
            chain: list[ir.Assign] = []
            if up.inverse and up.via:
                # the views between the base and the written view, of the old base; the
                # written entries put back through each, innermost first
                olds: list[ir.Atom] = [target]
                for inner in up.via:  # (in the branch: only where the views are these)
                    step = ir.Assign(self.at.namer.fresh("old"), ir.Call(
                        inner.fn, (olds[-1], *inner.args[1:]), inner.kwargs), self.at.line)
                    chain.append(step)
                    olds.append(ir.Var(step.target))
                new: ir.Atom = changed
                for recipe, old in zip((*up.via, up.form)[::-1], olds[::-1], strict=True):
                    step = ir.Assign(self.at.namer.fresh("put_back"),
                                     self.put_back(recipe, old, new), self.at.line)
                    chain.append(step)
                    new = ir.Var(step.target)
                value: ir.Expr = chain.pop().value
            # the base, the written view's entries put back (``def_view_inverse``)
            elif inverse is not None:
                fn, takes_base = inverse
                rest = up.form.args[1:]
                value = ir.Call(
                    ir.Ref(fn, getattr(fn, "__name__", "inverse")),
                    (target, changed, *rest) if takes_base else (changed, *rest),
                )
            elif up.inverse:  # the base, with the changed view written into it
                value = ir.Call(
                    ir.Ref(runtime.assign_item, "assign_item"),
                    (target, up.form.args[1], changed),
                )
            else:
                base: ir.Atom = changed
                for inner in up.via:  # (views of the new array, as the old one had them)
                    recipe = ir.Call(inner.fn, (base, *inner.args[1:]), inner.kwargs)
                    base = self.lowering.bind(recipe, "base")
                    self.recipes[base.name] = recipe
                value = ir.Call(up.form.fn, (base, *up.form.args[1:]), up.form.kwargs)
            made: tuple[ir.Stmt, ...] = (*chain, ir.Assign(target.name, value, self.at.line))
            if written is not None:
                # the written view, read again from its new base: the two share memory again, as
                # in Python, so that a later write through either is seen by the other (``v1 =
                # v0[1:]`` in a loop)
                base_again: ir.Atom = target
                for inner in up.via if up.inverse else ():
                    view_again = ir.Call(inner.fn, (base_again, *inner.args[1:]), inner.kwargs)
                    step = ir.Assign(self.at.namer.fresh("again"), view_again, self.at.line)
                    made += (step,)
                    base_again = ir.Var(step.target)
                    self.recipes[step.target] = view_again
                again = ir.Call(up.form.fn, (base_again, *up.form.args[1:]), up.form.kwargs)
                made += (ir.Assign(written.name, again, self.at.line),)
                # (which view it is, where it is one: ``view_of`` asks)
                self.recipes[written.name] = again
            branch = ir.If(is_view, made, (), self.at.line)
            view = (*self.at.body[start:], branch)
            del self.at.body[start:]
        if up.identity:
            made = (
                ir.If(
                    same, (ir.Assign(target.name, changed, self.at.line),), view, self.at.line
                ),
            )
        else:
            made = view
        # the same object as a variable followed before: its value
        self.at.body += self.unless_twins(target, up.twins, made)
        # the same object where ``view_of`` said 1; where it may be a view instead, only memory
        # is shared
        self.share(target.name, changed.name, alias=up.form is None)
        # (that view of the changed object, where it is one)
        if up.form is not None and not up.inverse:  # (through the views ``via`` made again)
            self.recipes[target.name] = ir.Call(
                up.form.fn, (base if up.via else changed, *up.form.args[1:]), up.form.kwargs
            )

    def unless_twins(self, target: ir.Var, twins: tuple[tuple[str, ir.Var], ...],
                     made: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        """``made``, unless ``target`` is the very object of a variable followed before
        (``twins``: each with the flag that says so): then that variable's new value."""
        for twin, one in reversed(twins):
            made = (
                ir.If(
                    one,
                    (ir.Assign(target.name, self.followed_value(twin), self.at.line),),
                    made,
                    self.at.line,
                ),
            )
        return made

    def refill(self, up: FollowUp, changed: ir.Var) -> None:
        """``up.user``, a list, tuple or dict that may hold the object that changed, made again with
        ``changed`` in each slot that held it (``up.held``, found before the change); the very
        object of a variable followed before, that variable's new value."""
        assert up.held is not None and up.before is not None
        value = ir.Call(
            ir.Ref(runtime.replaced, "replaced"), (self.at.env[up.user], up.held, changed)
        )
        # one binding, under a new name (``xs_1 = ...``)
        if not up.twins and not self.is_mutable(up.user):
            target = self.lowering.bind(value, up.user, user=True)
            self.at.env[up.user] = target
            self.carry(up.user)
        else:  # a name the branch on its twins assigns
            target = self.own_name(up.user, self.at.env[up.user])
            made: tuple[ir.Stmt, ...] = (ir.Assign(target.name, ir.Call(
                ir.Ref(runtime.replaced, "replaced"), (target, up.held, changed)), self.at.line),)
            self.at.body += self.unless_twins(target, up.twins, made)
        # it holds what it held, and the new
        for item in {*self.holds.get(up.before.name, set()), changed.name}:
            self.contain(target.name, item)
        for name in up.names:  # its other names: the same object
            self.rebind_name(name, target)
        # (the same object where it held none of it)
        self.share(target.name, up.before.name, alias=True)

    def variables_in(self, names: set[str], owner: str) -> list[ir.Var]:
        """The live variables, but ``owner``, whose objects are among the IR ``names``: those bound,
        and read after the statement being lowered (``live``, where known), as a change nothing
        reads is no change."""
        live = self.at.live
        found = [
            other
            for name, other in self.at.env.items()
            if name != owner
            and isinstance(other, ir.Var)
            and other.name in names
            and (live is None or name in live)
        ]
        # (an object's attributes: live)
        fields = [ir.Var(v) for v in self.at.field_labels if v in names and v != owner]
        return found + [atom for atom in fields if atom.name in names and atom not in found]

    def check_apart(self, atom: ir.Var, others: list[ir.Var], flag: ir.Var | None = None) -> None:
        """``check_in_place(atom, others, where)``, at run time (where ``flag`` is true, if
        given)."""
        where = self.at.line.where()
        start = len(self.at.body)
        others = list(dict.fromkeys(others))
        pack = self.lowering.bind(ir.Pack(tuple(others)), "others", holds=False)
        users = {
            atom.name: name for name, atom in self.at.env.items() if isinstance(atom, ir.Var)
        } | self.at.field_labels
        names = ", ".join(
            dict.fromkeys(
                _shown(users.get(v.name) or self.at.owner.get(v.name) or "§") for v in others
            )
        )
        self.lowering.bind(ir.Call(ir.Ref(runtime.check_in_place, "check_in_place"),
                          (atom, pack, ir.Const(where), ir.Const(names))), "checked")
        if flag is not None:  # the two statements, in a branch of their own
            branch = tuple(self.at.body[start:])
            del self.at.body[start:]
            self.at.body.append(ir.If(flag, branch, (), self.at.line))

    def contain(self, container: str, item: str) -> None:
        """Record that the list or tuple ``container`` holds the object ``item``
        (``xs.append(item)``)."""
        self.holds.setdefault(container, set()).add(item)
        self.held_by.setdefault(item, set()).add(container)

    def reaching(self, name: str, container: bool) -> set[str]:
        """The IR names that may reach the object ``name`` holds: those sharing its memory, the
        lists and tuples holding it (or holding them); unless only a list changes (``container``:
        its items stay as they are), also the objects it holds, and theirs."""
        found, stack = {name}, [name]
        while stack:
            current = stack.pop()
            near = self.shares.get(current, set()) | self.held_by.get(current, set())
            if not container:
                # an unpacked name's object is its source's item: a change of its items is seen
                # there (a list's own change, append or pop, is done in place by the generated code
                # as by Python)
                near = near | self.holds.get(current, set())
                if current in self.unpacked:
                    near = near | {self.unpacked[current]}
            for other in near - found:
                found.add(other)
                stack.append(other)
        return found

    def share(self, a: str, b: str, alias: bool = False) -> None:
        """Record that IR names ``a`` and ``b`` may refer to the same memory; ``alias``: they are
        names of one object, if both are bound (``v = x``), not a view and its base."""
        group = self.shares.get(a, set()) | self.shares.get(b, set()) | {a, b}
        for name in group:
            self.shares[name] = group - {name}
        if alias:
            self.aliased.setdefault(a, set()).add(b)
            self.aliased.setdefault(b, set()).add(a)
            # one object, one making: a copy of a view is that view too; not, in a branch, a name
            # bound on more than one path (``mutable``) where the view is made with names of its own
            # (``y[k:]``'s index): another path does not bind them, and would read them unbound (the
            # name is then asked about as possibly the very object, a view of it refused at run
            # time). A loop's body binds them at every step before they are read.
            in_branch = self.at.nesting > len(self.at.loops)
            for one, other in ((a, b), (b, a)):
                if one in self.recipes and other not in self.recipes and not (
                    in_branch
                    and other in self.at.mutable
                    and any(isinstance(x, ir.Var) for x in self.recipes[one].args[1:])
                ):
                    self.recipes[other] = self.recipes[one]

    def aliases(self, name: str) -> set[str]:
        """The IR names that ``share(..., alias=True)`` connects to ``name``: the same object, where
        bound."""
        found, stack = {name}, [name]
        while stack:
            for other in self.aliased.get(stack.pop(), set()) - found:
                found.add(other)
                stack.append(other)
        return found

    def snapshot(self, atom: ir.Atom, user_name: str) -> ir.Atom:
        """``atom`` for a new binding of ``user_name``: a mutable name's current value is copied,
        since it changes."""
        if isinstance(atom, ir.Var) and (
            atom.name in self.at.mutable or self.at.owner.get(atom.name) in self.at.changing
        ):
            copied = self.lowering.bind(atom, user_name, user=True)
            self.share(copied.name, atom.name, alias=True)
            return copied
        return atom

    def hold(self, atom: ir.Atom) -> ir.Atom:
        """``atom``, or a copy of it if it is a mutable name that a later binding may overwrite."""
        if isinstance(atom, ir.Var) and atom.name in self.at.mutable:
            held = self.lowering.bind(atom, atom.name)
            self.share(held.name, atom.name, alias=True)
            return held
        return atom

    def copy(self, name: str, atom: ir.Atom) -> None:
        """``name = atom``, unless the value was already computed into ``name``. The name holds
        ``atom``'s kind of container where it had none (its first binding, or one after a loop or
        a branch that left it unknown); bound so to another kind than before (a dict, then a list)
        it is no longer known to be either (``Frame.kinds``)."""
        if atom != ir.Var(name):
            self.at.body.append(ir.Assign(name, atom, self.at.line))
            if isinstance(atom, ir.Var):
                self.share(name, atom.name, alias=True)
            kind = container_kind(self.at, atom)
            if name in self.at.kinds and kind != self.at.kinds[name]:
                del self.at.kinds[name]
            elif kind:  # (``t = make(x)``: the dict an inlined helper returns)
                self.at.kinds[name] = kind
        self.note_views(ir.Var(name))

    def note_views(self, atom: ir.Atom) -> None:
        """If the statement that made ``atom`` returns a view (``x[1:]``, ``x.T``,
        ``np.reshape``...), record it."""
        if not isinstance(atom, ir.Var) or not self.at.body:
            return
        last = self.at.body[-1]
        if not isinstance(last, ir.Assign) or last.target != atom.name:
            return
        call = last.value if isinstance(last.value, ir.Call) else None
        holds = registry.holds_items(call.fn.obj) if call is not None else None
        if (
            call is not None
            and registry.returns_view(call.fn.obj)
            and call.args
            and isinstance(call.args[0], ir.Var)
        ):
            self.share(atom.name, call.args[0].name)
            # made again from the array after a write (``followed``): its other operands as they are
            # then, which ``view_of`` checks by the layout they give (an index a loop moved on gives
            # another view)
            self.recipes[atom.name] = self.held_index(atom.name, call)
            if call.fn.obj in (operator.getitem, runtime.list_item) and self.container_like(
                call.args[0]
            ):
                # (an item read of a list or dict: what it holds)
                self.contain(call.args[0].name, atom.name)
            pack = self.packs.get(call.args[0].name)
            if (
                pack is not None
                and len(call.args) == 2
                and isinstance(call.args[1], ir.Const)
                and call.args[0].name not in self.at.mutable
            ):  # ``[y][0]``: the very object ``y``
                elt = next(
                    (e for k, e in enumerate(pack.elts) if pack.slot(k) == call.args[1].value), None
                )
                if isinstance(elt, ir.Var):
                    self.share(atom.name, elt.name, alias=True)
        elif call is not None and is_user_function(call.fn.obj):
            # a function of the user's may return an argument, a part of one, or a view of one
            # (``return a``): taken as possibly the very object, so that a write through either asks
            # ``view_of`` which it is (the same object is followed; any other overlap refused)
            # One that returns a view of a parameter (``return y[1:]``): that view of the argument,
            # made again after a write as a view made here is (``view_of`` asks which it is).
            view = self.return_view(call.fn.obj)
            k, recipe = view if view is not None and not call.kwargs else (-1, None)  # (a constant
            # view's recipe; one made with what the call gives it is inlined: ``returns_a_view``)
            for position, arg in enumerate((*call.args, *(a for _, a in call.kwargs))):
                if isinstance(arg, ir.Var) and position == k and recipe is not None \
                        and self.array_like(arg):
                    self.share(atom.name, arg.name)
                    self.recipes[atom.name] = ir.Call(
                        recipe.fn, (arg, *recipe.args[1:]), recipe.kwargs
                    )
                elif isinstance(arg, ir.Var):
                    self.share(atom.name, arg.name, alias=self.array_like(arg))
        elif call is not None and holds == "always":
            # a new container of the same objects (``list(xs)``, ``sorted(xs)``)
            for arg in call.args:
                if isinstance(arg, ir.Var):
                    self.share(atom.name, arg.name)
                    # (what a container made here holds)
                    for item in sorted(self.holds.get(arg.name, ())):
                        self.contain(atom.name, item)
        elif (
            call is not None
            and holds == "containers"
            and call.args
            and isinstance(call.args[0], ir.Var)
        ):
            # ``x.copy()``: the same objects only if ``x`` is a list, tuple or dict
            source = call.args[0]
            flag = self.at.namer.fresh(f"{source.name}_container")
            if (
                self.at.nesting
            ):  # made in a branch or a loop: true (check) on the paths that skip it
                self.presets.append(ir.Assign(flag, ir.Const(True), self.at.line))
                self.at.mutable.add(flag)
            self.at.body.append(
                ir.Assign(
                    flag,
                    ir.Call(ir.Ref(runtime.is_container, "is_container"), (source,)),
                    self.at.line,
                )
            )
            self.copied_from[atom.name] = (source.name, flag)
            # (a container's copy holds what it holds)
            for item in sorted(self.holds.get(source.name, ())):
                self.contain(atom.name, item)
        elif (
            call is not None
            and call.fn.obj is runtime.assign_item
            and len(call.args) == 3
            and isinstance(call.args[0], ir.Var)
            and self.holds.get(call.args[0].name)
        ):
            # a list, tuple or dict with a slot written anew (``parts[1] = v``): the same
            # container to Python, so it holds what the old one held (the replaced object taken
            # as still held: a write into it is then guarded, never missed) and the new value; a
            # later write into one of those objects reaches it (``y *= 2`` where ``parts[0]`` is
            # ``y``)
            for item in sorted(self.holds.get(call.args[0].name, ())):
                self.contain(atom.name, item)
            if isinstance(call.args[2], ir.Var):
                self.contain(atom.name, call.args[2].name)
        elif (
            call is not None
            and registry.lookup(call.fn.obj) is None
            and not (getattr(call.fn.obj, "__module__", None) or "").startswith("ast_ad.")
        ):
            # a function the registry does not know (run on values the derivative does not follow:
            # ``np.unstack(m)``, a scipy call on constants) may give back its arguments' memory (a
            # tuple of views of ``m``'s rows): a write through what it gives asks ``view_of``, which
            # refuses any overlap (it was lost)
            for arg in (*call.args, *(a for _, a in call.kwargs)):
                if isinstance(arg, ir.Var):
                    self.share(atom.name, arg.name)
        # a container holds its elements
        elif isinstance(last.value, ir.Pack) and not self.checked(atom.name):
            self.packs[atom.name] = last.value
            for elt in last.value.elts:
                if isinstance(elt, ir.Var):
                    self.contain(atom.name, elt.name)

    def held_index(self, name: str, call: ir.Call) -> ir.Call:
        """The recipe of the view ``name = x[index]`` (``call``): where a branch binds ``name`` and
        another path may bind it too (``w = y[1:]`` here, ``w = y[:2]`` there), its index held
        under a name of ast_ad's that each such path binds (``w_at = slice(1, None)``), so that the
        one recipe ``y[w_at]`` is the view of whichever path ran. The fact it relies on:
        ``view_of`` compares the layout the recipe gives with the object the name holds before a
        write follows it, so a path that bound the name otherwise (``y.T``, another array's view)
        is refused at run time, never made again from a recipe that is not its own."""
        if not (
            call.fn.obj is operator.getitem
            and len(call.args) == 2
            and not call.kwargs
            and name in self.at.mutable
            and self.at.nesting > len(self.at.loops)
        ):
            return call
        held = self.indices.get(name)
        if held is None:
            held = self.indices[name] = self.at.namer.fresh(f"{name}_at")
            self.at.mutable.add(held)
            self.at.locals.add(held)
            # (``None`` on the paths that bind no such view: a probe of a list by it finds none,
            # and an array's, ``y[None]``, has another layout than any view ``name`` holds there,
            # which ``view_of`` tells apart or refuses)
            self.presets.append(ir.Assign(held, ir.Const(None), self.at.line))
        self.at.body.insert(len(self.at.body) - 1, ir.Assign(held, call.args[1], self.at.line))
        return ir.Call(call.fn, (call.args[0], ir.Var(held)), call.kwargs)

    def checked(self, name: str) -> bool:
        """Whether the IR name ``name`` holds a variable that only checks read
        (``normalize._checked_only``): a tuple of the names a check of ast_ad's compares with an
        object about to change, in code it wrote, read again. It holds those names' objects, but
        nothing reads them through it, so it shares nothing."""
        if not self.checked_only:
            return False
        user = self.at.owner.get(name) or next(
            (u for u, atom in self.at.env.items() if atom == ir.Var(name)), None
        )
        return user is not None and user in self.checked_only

    def local(self, name: str) -> ir.Var:
        """The IR name a local variable is bound to now."""
        return _var(self.at.env[name])

    def is_mutable(self, user_name: str) -> bool:
        """Whether ``user_name`` holds its own mutable name (not a copy of another variable's)."""
        atom = self.at.env.get(user_name)
        return (
            isinstance(atom, ir.Var)
            and atom.name in self.at.mutable
            and self.at.owner.get(atom.name) == user_name
        )


_PROBE = ir.Ref(runtime.view_probe, "view_probe")


def _shown(user: str) -> str:
    """The variable ``user`` as a message names it: a value ast_ad holds (``a, b = y[1], y[0]``'s)
    has no name."""
    return "a value the right-hand side read" if user.startswith(syntax.MARK) else user


@record
class FollowUp:
    """A variable (``user``) that sees the object ``owner`` holds, to make again once that has
    changed: ``seen`` holds what ``runtime.view_of`` found; ``form``, the view call that relates
    them (``inverse``: the changed object is the view of the variable's, not the other way
    round)."""

    # the variable whose object changed, or a key of ``changed_objects`` (an item's object)
    owner: str
    user: str
    seen: ir.Var | None  # (``None``: the very object, certainly)
    form: ir.Call | None
    inverse: bool
    # whether the variable may be the changed object itself (not where one holds the other)
    identity: bool
    before: ir.Var | None = None  # the variable's value before the write
    # earlier followed variables, and whether this is their object
    twins: tuple[tuple[str, ir.Var], ...] = ()
    # a container the variable is: the slots that held the changed object
    held: ir.Var | None = None
    # the variable's other names (``zs = xs``; ``z = y`` where ``y`` is written through a third
    # name, a helper's parameter): one object, after the change too
    names: tuple[str, ...] = ()
    # made again from ``owner``'s new value, which another follow-up of the write gives it
    chained: bool = False
    # the views between the changed object and ``form``'s base (``w = y.T[1:]``: ``y.T``)
    via: tuple[ir.Call, ...] = ()


@record
class ByMemory:
    """A write whose other variables are made again from where their entries lie
    (``Memory.by_memory``): ``changed``, the written variable or the key of its item's new object
    in ``changed_objects``; ``direct``, the written variable where it is the array itself (made
    again too, as a view of the root); ``plan``, what ``shared_family`` found; ``pack``, the
    other variables' old objects; ``entries``, each one's place in ``pack`` and its names."""

    changed: str
    direct: str | None
    plan: ir.Var
    pack: ir.Var
    entries: tuple[tuple[int, tuple[str, ...]], ...]


def _var(atom: ir.Expr) -> ir.Var:
    """``atom``, which the caller knows to be a name (a list appended to, a local rebound)."""
    if not isinstance(atom, ir.Var):
        raise TypeError(f"expected a name, got {atom!r}")
    return atom


def live_after(body: list[gast.stmt]) -> dict[int, frozenset[str]]:
    """For each statement of ``body``, nested ones included, the names something may read after it,
    before binding them again: what the statements after it read, in its block and the blocks around
    it, what its loops' next steps read, and what any function or lambda defined in ``body`` reads
    (it may be called later)."""
    out: dict[int, frozenset[str]] = {}
    always = {n.id for stmt in body for node in syntax.walk(stmt)
              if isinstance(node, (gast.FunctionDef, gast.Lambda)) for n in syntax.walk(node)
              if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load)}
    _live_block(body, set(), frozenset(always), out)
    return out


def _live_block(statements: list[gast.stmt], after: set[str], always: frozenset[str],
                out: dict[int, frozenset[str]]) -> set[str]:
    """``live_after`` of ``statements``, into ``out``; what is read before it is bound again from
    their top on (``after`` after them). A function of the module's, not a nested one: a nested
    function that calls itself and its cell hold each other, which leaves the transform's work to
    the cycle collector."""
    live = set(after)
    for stmt in reversed(statements):
        out[id(stmt)] = frozenset(live | always)
        if isinstance(stmt, (gast.For, gast.While)):
            header = syntax.name_ids(
                stmt.iter if isinstance(stmt, gast.For) else stmt.test, loads=True
            )
            top: set[str] = set()
            # the next step reads what the top of the body does: a fixpoint, reached in a few
            while True:
                again = _live_block(stmt.body, live | top | header, always, out)
                if again <= top:
                    break
                top |= again
            live = live | top | header | _live_block(stmt.orelse, live, always, out)
        elif isinstance(stmt, gast.If):
            live = (
                _live_block(stmt.body, live, always, out)
                | _live_block(stmt.orelse, live, always, out)
                | syntax.name_ids(stmt.test, loads=True)
            )
        else:
            bound = {
                t.id
                for target in getattr(stmt, "targets", [])
                if isinstance(stmt, gast.Assign)
                for t in (
                    [target] if isinstance(target, gast.Name) else getattr(target, "elts", [])
                )
                if isinstance(t, gast.Name)
            }
            read = syntax.name_ids(stmt, loads=True)
            if isinstance(stmt, gast.AugAssign) and isinstance(stmt.target, gast.Name):
                # ``v += d`` reads ``v`` (and changes its object, if an array)
                read = read | {stmt.target.id}
            live = (live - bound) | read
    return live


def loop_shared(
    loop: gast.For | gast.While, checked_only: set[str], static: Callable[[gast.expr], Any]
) -> set[str]:
    """The names a loop's body may bind to an object that another name also holds, and those other
    names.

    ``x = v`` (or ``x, v = v, w``, ``x = v[1:]``, ``x = f(v)``, ``for x in xs``) late in a loop's
    body makes ``x`` and ``v`` share an object from the next step on: an in-place change of either,
    earlier in the body, is then seen through both. A value that is certainly new shares nothing:
    arithmetic, a constant, a list or dict of constants (``rows = []``), a call of a function the
    registry says makes a new object (``registry.makes_new_object``: ``state = np.stack(rows)``;
    ``static`` says which object a dotted name is, as the lowering reads it, ``None`` for a local);
    nor does a tuple that only checks read (``checked_only``: see ``Memory.checked``).
    """
    names: set[str] = set()
    for node in gast.walk(loop):
        if isinstance(node, gast.Assign):
            for target in node.targets:
                _sharing(target, node.value, names, static)
        elif isinstance(node, (gast.For, gast.comprehension)) and not _over_range(node.iter):
            # (a loop over a range binds integers, which share nothing)
            _sharing(node.target, None, names, static)
            names.update(n.id for n in gast.walk(node.iter) if isinstance(n, gast.Name))
    return names - checked_only


def _over_range(iterated: gast.expr) -> bool:
    """Whether ``iterated`` is a call of ``range``, whose items are integers."""
    return (
        isinstance(iterated, gast.Call)
        and isinstance(iterated.func, gast.Name)
        and iterated.func.id == "range"
    )


def loop_rebinds(loop: gast.For | gast.While) -> set[str]:
    """The names a loop's body binds to another name's object, and those names (``y = kept``, ``a, b
    = b, a``): from the next step on, each pair may be one object, which a write through either
    changes for both."""
    names: set[str] = set()
    for node in gast.walk(loop):
        if isinstance(node, gast.Assign):
            for target in node.targets:
                _rebinding(target, node.value, names)
    return names


def _rebinding(target: gast.expr, value: gast.expr, names: set[str]) -> None:
    """Add to ``names`` both sides of each ``t = v`` that ``target = value`` binds, ``v`` a name
    (``loop_rebinds``)."""
    if isinstance(target, (gast.Tuple, gast.List)) and isinstance(value, (gast.Tuple, gast.List)) \
            and len(target.elts) == len(value.elts):
        for t, v in zip(target.elts, value.elts, strict=True):
            _rebinding(t, v, names)
    elif isinstance(target, gast.Name) and isinstance(value, gast.Name) and target.id != value.id:
        names.update((target.id, value.id))


def _sharing(target: gast.expr, value: gast.expr | None, names: set[str],
             static: Callable[[gast.expr], Any]) -> None:
    """Add to ``names`` those that ``target = value`` may leave holding one object
    (``loop_shared``)."""
    if isinstance(target, (gast.Tuple, gast.List)) and isinstance(value, (gast.Tuple, gast.List)) \
            and len(target.elts) == len(value.elts):
        for t, v in zip(target.elts, value.elts, strict=True):
            _sharing(t, v, names, static)
        return
    if value is not None and isinstance(
        value, (gast.Constant, gast.BinOp, gast.UnaryOp, gast.Compare)
    ):
        return
    if isinstance(value, (gast.List, gast.Dict, gast.Set)) and not any(
        isinstance(n, gast.Name) for n in gast.walk(value)
    ):
        # a new container of constants (``rows = []``): no other name holds it, nor what it holds
        return
    if isinstance(value, gast.Call) and registry.makes_new_object(static(value.func)):
        return
    # ``y[i] = v``: y holds v, stays y's
    if not isinstance(target, (gast.Subscript, gast.Attribute)):
        names.update(n.id for n in gast.walk(target) if isinstance(n, gast.Name))
    if (
        isinstance(value, gast.Call)
        and isinstance(value.func, gast.Attribute)
        and value.func.attr == "pop"
        and not value.args
    ):
        # ``v = xs.pop()``: v is what xs held (``WriteLowering.pop`` records it), not xs
        return
    # ``y[i + 1]``: an item or view of ``y``; the index shares nothing
    while isinstance(value, gast.Subscript):
        value = value.value
    if value is not None:
        names.update(n.id for n in gast.walk(value) if isinstance(n, gast.Name))


_SCALARS = (type(None), bool, int, float, complex, str, bytes, range, np.generic)


def _shared_defaults(fn: Any) -> set[str]:
    """The parameters of ``fn`` whose default value is, or holds, an object that may change (an
    array, a list, a dict...): one object for every call, so a change one call makes is there at the
    next."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return set()
    return {p.name for p in parameters if p.default is not p.empty and not _unchanging(p.default)}


def _unchanging(value: Any) -> bool:
    if isinstance(value, (tuple, frozenset)):
        return all(_unchanging(item) for item in value)
    return isinstance(value, _SCALARS)


def _checked_only(tree: gast.FunctionDef, scope: dict[str, Any]) -> set[str]:
    """The names that nothing reads but a call that reads them only by identity
    (``registry.def_identity_read``: the tuple of other names that a check compares with the object
    about to change, in code ast_ad wrote, read again). Found only where the function's globals hold
    such a function under its own name."""
    names = {getattr(fn, "__name__", ""): fn for fn in registry.fact_table("identity_read")}
    readers = {name for name, fn in names.items() if scope.get(name) is fn}
    if not readers:
        return set()
    checked: set[str] = set()
    other: set[str] = set()
    by_check: set[int] = set()
    for node in syntax.walk(tree):
        if (
            type(node) is gast.Call
            and type(node.func) is gast.Name
            and node.func.id in readers
            and not node.keywords
        ):
            k = registry.identity_read(scope[node.func.id])
            if k is not None and k < len(node.args) and type(node.args[k]) is gast.Name:
                by_check.add(id(node.args[k]))
        elif type(node) is gast.Name and type(node.ctx) is gast.Load:
            (checked if id(node) in by_check else other).add(node.id)
    return checked - other
