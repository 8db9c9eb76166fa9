"""Random programs in the language ast_ad differentiates, as a hypothesis strategy: ``programs()``.

>>> from hypothesis import given
>>> from ast_ad.testing import programs
>>> @given(programs(loops=False))
... def test(program):
...     assert "def f(" in program.source

Each production of the grammar has its own small function: an expression is a
leaf, a bounded unary function, or a binary operation; a statement is an
assignment, an augmented or tuple assignment, an ``if``/``elif``/``else``, a
``for`` or ``while`` loop (with ``break``, ``continue`` and early ``return``),
a call to a generated helper, or a list built in a loop; with arrays, products
with a matrix built from the inputs, and reversals. Values stay finite:
unary functions are bounded (``tanh``, ``sin``), divisions are by ``1 + e * e``
and loops scale what they carry. Branch conditions compare against constants,
so a program with them is only piecewise smooth (``Program.smooth`` says).

Write a program to a real module with ``program.load(directory)`` (ast_ad
reads source from files) and call ``program.arguments(data)`` inside a test
to draw its inputs. hypothesis shrinks a failing program to a small one; its
``source`` is what to print.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
from typing import Any

import numpy as np
from hypothesis import strategies as st

from ast_ad.core.records import field, record

UNARY = [
    "np.sin({})",
    "np.cos({})",
    "np.tanh({})",
    "np.exp(np.tanh({}))",
    "np.log(1.0 + {0} * {0})",
    "np.sqrt(1.0 + {0} * {0})",
    "-{}",
    "abs({})",
]
BINARY = [
    "{0} + {1}",
    "{0} - {1}",
    "{0} * {1}",
    "{0} / (1.0 + {1} * {1})",
    "0.5 * {0} * np.sin({1})",
]
# With arrays: a matrix ``m`` (built from the inputs at the top of ``f``) times vectors,
# reversals, and joins of slices whose lengths are the vector's (``analysis.lengths``: a rotation,
# and GradBench ``ode``'s field) (``ONES *`` makes a number a vector too).
MATRIX = ["(m @ (ONES * {}))", "((ONES * {}) @ m)", "np.dot(m, ONES * {})", "(ONES * {})[::-1]",
          "np.concatenate([(ONES * {0})[1:], (ONES * {0})[:1]])",
          "np.concatenate([(ONES * {0})[:1], (ONES * {0})[1:] * (ONES * {0})[:-1]])"]
_serial = itertools.count()


@record(frozen=False)
class Program:
    """A generated module: helper functions and a function ``f`` to differentiate."""

    source: str
    arity: int
    arrays: bool
    smooth: bool
    features: set[str] = field(default_factory=set)

    def __repr__(self) -> str:
        return f"Program(features={sorted(self.features)}):\n{self.source}"

    def load(self, directory: str) -> Any:
        """Write the program to a new module file in ``directory`` and return its ``f``."""
        name = f"ast_ad_program_{os.getpid()}_{next(_serial)}"
        path = os.path.join(directory, name + ".py")
        with open(path, "w") as out:
            out.write(self.source)
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None  # a .py file we just wrote
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.f

    def arguments(self, data: st.DataObject) -> tuple[Any, ...]:
        """Draw inputs for ``f``: floats in [-2, 2], or arrays of shape (3,) of them."""
        value: st.SearchStrategy[Any] = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)
        if self.arrays:
            from hypothesis.extra import numpy as hnp
            value = hnp.arrays(np.float64, (3,), elements=value)
        return tuple(data.draw(value) for _ in range(self.arity))


class _Writer:
    """Draws one program, statement by statement, keeping track of the names in scope."""

    def __init__(self, draw: Any, options: dict[str, Any]):
        self.draw, self.options = draw, options
        self.names: list[str] = []
        self.counter = itertools.count()
        self.features: set[str] = set()
        self.smooth = True
        self.helpers: list[str] = []
        self.matrix = False  # whether ``m`` is in scope
        # whether the helper ``damp`` (it changes its argument in place) is defined
        self.damp = False

    # ---- expressions -----------------------------------------------------------------------------
    def expr(self, depth: int = 0) -> str:
        choice = self.draw(st.integers(0, 2 if depth < 3 else 0))
        if choice == 0:
            return self.leaf()
        if choice == 1:
            unary = self.draw(st.sampled_from(UNARY + (MATRIX if self.matrix else [])))
            if unary in MATRIX:
                self.features.add("matrix")
            if unary.startswith("abs"):
                self.smooth = False  # abs has a kink at 0
            return str(unary.format(self.expr(depth + 1)))
        if self.helpers and self.draw(st.integers(0, 4)) == 0:
            # lists into a helper that returns one: the other's adjoint is None
            if self.draw(st.integers(0, 3)) == 0:
                self.features.add("list picked by a helper")
                self.smooth = False  # it branches on a value
                items = [self.expr(depth + 2) for _ in range(4)]
                which = self.draw(st.integers(0, 1))
                return f"pick([{items[0]}, {items[1]}], [{items[2]}, {items[3]}])[{which}]"
            self.features.add("helper call")
            return f"{self.draw(st.sampled_from(self.helpers))}({self.expr(depth + 1)})"
        binary: str = self.draw(st.sampled_from(BINARY))
        return "(" + binary.format(self.expr(depth + 1), self.expr(depth + 1)) + ")"

    def leaf(self) -> str:
        if self.draw(st.integers(0, 4)) == 0:
            return repr(self.draw(st.sampled_from([0.5, 1.5, 2.0, -0.25])))
        name: str = self.draw(st.sampled_from(self.names))
        return name

    def condition(self) -> str:
        self.smooth = False
        summary = f"np.sum({self.expr(2)})" if self.options["arrays"] else self.expr(2)
        compare = self.draw(st.sampled_from([">", "<"]))
        return f"{summary} {compare} {self.draw(st.sampled_from([0.0, 0.3, -0.4]))}"

    def fresh(self) -> str:
        name = f"v{next(self.counter)}"
        return name

    # ---- statements ------------------------------------------------------------------------------
    def target(self, name: str, depth: int) -> str:
        """The name a statement's result goes to: ``name``, new, at ``f``'s top level (``scoped``
        puts it in scope after the statement); inside a block, one in scope already (a name a
        block binds first would not be bound on every path)."""
        return name if depth == 0 else str(self.draw(st.sampled_from(self.names)))

    def scoped(self, lines: list[str], name: str, depth: int) -> list[str]:
        """``lines``, with ``name`` in scope after them where the statement is at the top level."""
        if depth == 0:
            self.names.append(name)
        return lines

    def block(self, indent: str, size: int, in_loop: bool, depth: int) -> list[str]:
        lines: list[str] = []
        for _ in range(size):
            lines += self.statement(indent, in_loop, depth)
        return lines

    def statement(self, indent: str, in_loop: bool, depth: int) -> list[str]:
        kinds = ["assign", "assign", "augment", "tuple"]
        if self.options["branches"] and depth < 2:
            kinds.append("if")
        if self.options["loops"] and depth < 2:
            kinds += ["for", "while"]
        if self.options["lists"] and depth < 2:
            kinds.append("list")
        if self.options["mutation"]:
            kinds += ["container", "choice", "complex"]
            kinds += (
                ["write", "write", "alias", "shared", "shared"] if self.options["arrays"] else []
            )
            kinds += ["damp"] if self.damp else []
        if self.options.get("written") and self.options["arrays"]:
            kinds += ["written", "written"]
        if in_loop and self.options["branches"]:
            kinds += ["jump"]
        if self.options["returns"] and depth > 0 and self.options["branches"]:
            kinds.append("return")
        kind = self.draw(st.sampled_from(kinds))
        lines: list[str] = getattr(self, "stmt_" + kind)(indent, in_loop, depth)
        return lines

    def stmt_assign(self, indent: str, in_loop: bool, depth: int) -> list[str]:
        value = self.expr()
        name = (
            self.draw(st.sampled_from(self.names))
            if in_loop or self.draw(st.booleans())
            else self.fresh()
        )
        if name not in self.names and depth == 0:
            self.names.append(name)
        elif name not in self.names:
            return [f"{indent}{self.draw(st.sampled_from(self.names))} = {value}"]
        carried = f"0.5 * np.tanh({value})" if in_loop else value
        return [f"{indent}{name} = {carried}"]

    def stmt_written(self, indent: str, in_loop: bool, depth: int) -> list[str]:
        """An array written out (``written=True``): numbers, or numbers with one computed from the
        program's values (``np.array`` of a list), of the inputs' three entries, so that it meets
        them in arithmetic; bound to a new name, or rebinding one (a name whose arrays are then
        written out in one place and computed in another)."""
        self.features.add("array written out")
        numbers = [self.draw(st.sampled_from(["0.5", "-1.0", "2.0", "0.25", "1"]))
                   for _ in range(3)]
        if self.draw(st.booleans()):
            numbers[self.draw(st.integers(0, 2))] = f"np.tanh(np.sum({self.expr(1)}))"
        value = f"np.array([{', '.join(numbers)}])"
        if self.draw(st.booleans()):
            value = f"{value} * {self.expr(1)}"
        if depth == 0 and not in_loop and self.draw(st.booleans()):
            name = self.fresh()
            self.names.append(name)
            return [f"{indent}{name} = {value}"]
        return [f"{indent}{self.draw(st.sampled_from(self.names))} = {value}"]

    def stmt_augment(self, indent: str, in_loop: bool, depth: int) -> list[str]:
        self.features.add("augmented assignment")
        name = self.draw(st.sampled_from(self.names))
        op, value = self.draw(
            st.sampled_from([("+=", "np.sin({})"), ("*=", "np.tanh({})"), ("-=", "0.5 * {}")])
        )
        return [f"{indent}{name} {op} {value.format(self.expr(1))}"]

    def stmt_tuple(self, indent: str, in_loop: bool, depth: int) -> list[str]:
        self.features.add("tuple assignment")
        a, b = self.draw(st.sampled_from(self.names)), self.draw(st.sampled_from(self.names))
        if a == b:
            return self.stmt_assign(indent, in_loop, depth)
        return [f"{indent}{a}, {b} = {b}, np.tanh({self.expr(1)})"]

    def stmt_if(self, indent: str, in_loop: bool, depth: int) -> list[str]:
        self.features.add("if")
        lines = [f"{indent}if {self.condition()}:"] + self.block(
            indent + "    ", self.draw(st.integers(1, 2)), in_loop, depth + 1
        )
        if self.draw(st.booleans()):
            self.features.add("elif")
            lines += [f"{indent}elif {self.condition()}:"] + self.block(
                indent + "    ", 1, in_loop, depth + 1
            )
        if self.draw(st.booleans()):
            lines += [f"{indent}else:"] + self.block(indent + "    ", 1, in_loop, depth + 1)
        return lines

    def stmt_for(self, indent: str, in_loop: bool, depth: int) -> list[str]:
        self.features.add("for")
        index = f"i{next(self.counter)}"
        steps = self.draw(st.integers(0, 4))
        body = [
            f"{indent}    {self.draw(st.sampled_from(self.names))} += 0.1 * {index} * "
            f"np.sin({self.leaf()})"
        ]
        body += self.block(indent + "    ", self.draw(st.integers(1, 2)), True, depth + 1)
        return [f"{indent}for {index} in range({steps}):"] + body

    def stmt_while(self, indent: str, in_loop: bool, depth: int) -> list[str]:
        self.features.add("while")
        counter = f"n{next(self.counter)}"
        body = self.block(indent + "    ", self.draw(st.integers(1, 2)), True, depth + 1)
        return [
            f"{indent}{counter} = 0",
            f"{indent}while {counter} < {self.draw(st.integers(0, 3))}:",
            f"{indent}    {counter} += 1",
        ] + body

    def stmt_jump(self, indent: str, in_loop: bool, depth: int) -> list[str]:
        word = self.draw(st.sampled_from(["break", "continue"]))
        self.features.add(word)
        return [f"{indent}if {self.condition()}:", f"{indent}    {word}"]

    def stmt_return(self, indent: str, in_loop: bool, depth: int) -> list[str]:
        self.features.add("early return")
        return [f"{indent}return {self.result(self.expr(1))}"]

    def stmt_list(self, indent: str, in_loop: bool, depth: int) -> list[str]:
        self.features.add("list")
        items, index, name = f"items{next(self.counter)}", f"j{next(self.counter)}", self.fresh()
        if self.draw(st.booleans()):
            lines = [
                f"{indent}{items} = []",
                f"{indent}for {index} in range({self.draw(st.integers(1, 3))}):",
                f"{indent}    {items}.append(np.tanh({self.expr(1)}) * {index})",
            ]
        # pairs of values, zipped (strict: Python's error where the lengths differ) and numbered
        else:
            self.features.add("zip")
            p, q, n = self.fresh(), self.fresh(), self.draw(st.integers(1, 2))
            firsts, seconds = (
                ", ".join(self.expr(2) for _ in range(n)),
                ", ".join(self.expr(2) for _ in range(n)),
            )
            lines = [
                f"{indent}{items} = []",
                f"{indent}for {index}, ({p}, {q}) in enumerate(zip([{firsts}], [{seconds}], "
                "strict=True)):",
                # numbers all
                f"{indent}    {items}.append(np.sum(np.tanh({p}) * {q}) * ({index} + 1))",
            ]
        joins = ["sum({})", "np.sum(np.stack({}), axis=0)", "{}[-1]"]
        if depth == 0 and "early return" not in self.features:
            # a list made once, not in a loop (code after an early return from a loop is moved
            # into one): reverse mode follows its pops too
            joins.append("{0}.pop() + sum({0})")
        joined = self.draw(st.sampled_from(joins))
        lines.append(f"{indent}{name} = {joined.format(items)}")
        if depth == 0:
            self.names.append(name)
        else:
            lines[-1] = f"{indent}{self.draw(st.sampled_from(self.names))} = {joined.format(items)}"
        return lines

    # ---- mutation, aliases and containers (``mutation=True``) ------------------------------------
    def scalar(self) -> str:
        """A number computed from the program's values, to write into an array."""
        return (
            f"np.tanh(np.sum({self.expr(2)}))"
            if self.options["arrays"]
            else f"np.tanh({self.expr(2)})"
        )

    def stmt_write(self, indent: str, in_loop: bool, depth: int) -> list[str]:
        """An item write on a private copy: repeated and fancy indices, slices, steps, np.add.at,
        out=."""
        self.features.add("item write")
        name, copy = self.draw(st.sampled_from(self.names)), self.fresh()
        index = self.draw(
            st.sampled_from(
                [
                    "0",
                    "-1",
                    "[0, 0, 2]",
                    "np.array([2, 0, 2])",
                    "1:",
                    "::2",
                    "np.array([True, False, True])",
                ]
            )
        )
        how = self.draw(st.sampled_from(["{c}[{i}] = {v}", "{c}[{i}] += {v}", "{c}[{i}] *= {v}",
                                         "np.add.at({c}, [0, 0, 2], {v})", "np.sin({c}, out={c})",
                                         "{c}.fill({v})"]))
        # a shape read
        start = self.draw(st.sampled_from(["np.ones(3) * {}", "np.zeros_like(np.ones(3) * {})"]))
        lines = [
            f"{indent}{copy} = {start.format(name)}",
            f"{indent}{how.format(c=copy, i=index, v=self.scalar())}",
        ]
        if depth == 0:
            self.names.append(copy)
        else:
            lines.append(f"{indent}{self.draw(st.sampled_from(self.names))} = {copy}")
        return lines

    def stmt_alias(self, indent: str, in_loop: bool, depth: int) -> list[str]:
        """A write through another name, a view or a container: Python changes both (ast_ad refuses
        it)."""
        self.features.add("alias write")
        name, array, alias = self.draw(st.sampled_from(self.names)), self.fresh(), self.fresh()
        views = [
            "{n}",
            "{n}[1:]",
            "{n}.reshape(3)",
            "[{n}][0]",
            "list([{n}])[0]",
            "[{n}, {n}].copy()[1]",
            "sorted([{n}], key=lambda v: v[0])[0]",
        ]
        view = self.draw(st.sampled_from(views)).format(n=array)
        lines = [f"{indent}{array} = np.ones(3) * {name}", f"{indent}{alias} = {view}",
                 f"{indent}{alias} *= {self.scalar()}"]
        if depth == 0:
            self.names.append(array)
        return lines

    def stmt_shared(self, indent: str, in_loop: bool, depth: int) -> list[str]:
        """An array another name, a view or a container slot also sees, written in place, in a loop
        or not, with both read after: the memory model makes the other name again from the written
        array (or refuses)."""
        name, base, other = self.draw(st.sampled_from(self.names)), self.fresh(), self.fresh()
        family = self.draw(
            st.sampled_from(
                ["name", "view", "container", "carried", "through", "swap", "rows", "sibling",
                 "nested", "paths", "held", "slots"]
            )
        )
        self.features.add(f"shared {family}")
        # a matrix under two names, its rows written through a row view in nested loops
        if family == "rows":
            row, inner = self.fresh(), indent + "    "
            target = self.target(self.fresh(), depth)
            return self.scoped([
                f"{indent}{base} = np.outer(np.ones(3) * {name}, np.ones(3)) * 1.0",
                f"{indent}{other} = {base}",
                f"{indent}for i in range(2):",
                f"{inner}{row} = {other}[i]",
                f"{inner}for j in range(3):",
                f"{inner}    {row}[j] = {row}[j] * 0.5 + {self.scalar()}",
                f"{indent}{target} = np.sum({base} * {base}, axis=0)"], target, depth)
        view = self.draw(
            st.sampled_from(
                [
                    "{b}[:]",
                    "{b}[1:]",
                    "{b}[::-1]",
                    "{b}.T",
                    "{b}.reshape(3)",
                    "{b}.reshape((3, 1))",
                    "{b}[::2]",
                    "tail({b})",
                    # views numpy's functions make (a write through one was once lost)
                    "np.flip({b})",
                    "np.flipud({b})",
                    "np.float64({b})",
                    "np.rot90({b}.reshape((3, 1)))[0]",
                    "np.matrix_transpose({b}.reshape((3, 1)))[0]",
                ]
            )
        )
        # a container holding the array, inside a tuple or not, written through: its path to it
        held, path = self.draw(st.sampled_from([
            ("[({b}, 1.0)]", "[0][0]"), ('{{"k": (2.0, {b})}}', '["k"][1]'),
            ("({b}, [1.0])", "[0]"), ("[(({b},), 1.0)]", "[0][0][0]"),
        ])) if family == "held" else ("", "")
        # a list or tuple of views of the array (``np.split``'s, slices that overlap, one view in
        # two slots, the array in a slot and deeper in another), written through a slot: the array
        # and every slot see it
        slots, slot = self.draw(st.sampled_from([
            ("np.split({b}, [1])", "[1]"), ("[{b}[:2], {b}[1:]]", "[1]"),
            ("[{b}[::-1], {b}[::2]]", "[0]"), ("({b}[:1], {b}[1:])", "[1]"),
            ("[{b}[1:], {b}[1:]]", "[0]"), ("[{b}, [{b}]]", "[1][0]"),
            ("[{b}[:2], ({b}[1:], 1.0)]", "[1][0]"),
        ])) if family == "slots" else ("", "")
        made = {
            "held": held,
            "slots": slots,
            "name": "{b}",
            "view": view,
            "container": self.draw(st.sampled_from(["[{b}]", '{{"k": {b}}}', "({b}, 1.0)"])),
            "carried": "{b}",
            "through": self.draw(st.sampled_from(["{b}", "{b}[1:]", "{b}[:]"])),
            "swap": "{b}",
            # another view of the array a view is written through; a view of a view
            "sibling": view,
            "paths": view,  # (two paths' views: below)
            "nested": self.draw(
                st.sampled_from(["{b}[::-1][1:]", "{b}.reshape((3, 1)).T[0]", "{b}[1:][::-1]"])
            ),
        }[family].format(b=base)
        lines = [f"{indent}{base} = np.ones(3) * {name}", f"{indent}{other} = {made}"]
        if family == "held" and self.draw(st.booleans()):
            # the array no name holds but the container (a write lost there once: the tuple in
            # the list was not put back)
            lines = [f"{indent}{other} = {held.format(b=f'(np.ones(3) * {name})')}"]
            base = name
        written = (other if family == "through" else other + path if family == "held"
                   else other + slot if family == "slots" else base)
        if family == "paths":  # a view of the array on each of two paths, written through
            first, second = (
                self.draw(st.sampled_from(["[:]", "[1:]", "[::-1]", "[::2]", "[:2]"]))
                for _ in range(2)
            )
            lines[1:] = [f"{indent}if {self.condition()}:",
                         f"{indent}    {other} = {base}{first}",
                         f"{indent}else:",
                         f"{indent}    {other} = {base}{second}"]
            written = other
        if family == "nested" and self.draw(st.booleans()):
            written = other  # a write through a view of a view
        if family == "sibling":
            written = self.fresh()
            through = self.draw(st.sampled_from(["[::2]", "[:2]", "[::-1]", "[:]"]))
            lines.append(f"{indent}{written} = {base}{through}")
        index = self.draw(st.sampled_from(["0", "1", "i"]))
        write = self.draw(st.sampled_from(["{w}[{i}] = {v}", "{w}[{i}] += {v}", "{w}[{i}] *= {v}"]))
        inner = indent + "    "
        if family == "swap":
            lines.append(f"{indent}{base}[0], {base}[1] = {base}[1], {base}[0]")
        elif family == "carried":  # the other name is bound again in the loop, after the write
            lines += [f"{indent}for i in range(2):",
                      f"{inner}{write.format(w=base, i=index, v=self.scalar())}",
                      f"{inner}{other} = {other} * 1.5"]
        elif self.options["loops"] and self.draw(st.booleans()):
            lines += [
                f"{indent}for i in range(2):",
                f"{inner}{write.format(w=written, i=index, v=self.scalar())}",
            ]
        else:
            lines.append(
                f"{indent}{write.format(w=written, i=index.replace('i', '1'), v=self.scalar())}"
            )
        read = {
            "container": f"{other}[{chr(34) + 'k' + chr(34) if made.startswith('{') else 0}]",
            "held": other + path,
            "slots": f"{other}[0]",
        }.get(family, other)
        target = self.target(self.fresh(), depth)
        lines.append(f"{indent}{target} = np.sum({read}) * {base}")
        return self.scoped(lines, target, depth)

    def stmt_container(self, indent: str, in_loop: bool, depth: int) -> list[str]:
        """Lists, tuples and dicts of values: built, joined, repeated and indexed."""
        self.features.add("container")
        box, name = self.fresh(), self.fresh()
        a, b = self.expr(1), self.expr(1)
        if self.draw(st.integers(0, 5)) == 0:  # a list comprehension, unpacked
            self.features.add("unpacked comprehension")
            first, second = self.fresh(), self.fresh()
            lines = [f"{indent}{first}, {second} = [np.tanh({a}) * k for k in (0.5, 2.0)]",
                     f"{indent}{name} = {first} * {second} + {b}"]
            if depth == 0:
                self.names.append(name)
            else:
                lines[-1] = (
                    f"{indent}{self.draw(st.sampled_from(self.names))} = {first} * {second} + {b}"
                )
            return lines
        if self.draw(st.integers(0, 5)) == 0:  # a loop over a dict's keys or a set's members
            looped = self.draw(st.sampled_from(["dict", "set"]))
            self.features.add(f"loop over a {looped}")
            over, term = {
                # (keys that are not the positions: read by position, k would be a value)
                "dict": (f"{{1: {a}, 0: {b}, 2: {a} * {b}}}", f"{box}[k]"),
                "set": ("{2, 0, 1}", f"[{a}, {b}, {a} - {b}][k]"),
            }[looped]
            target = self.target(name, depth)
            return self.scoped([f"{indent}{box} = {over}",
                                f"{indent}{target} = 0.0",
                                f"{indent}for k in {box}:",
                                f"{indent}    {target} = {target} * 0.5 + (k + 1.0) * {term}"],
                               name, depth)
        if self.draw(st.integers(0, 5)) == 0:
            # a loop whose body binds the list it steps through again (Python steps on through the
            # list it started with), or over the list of a name that is a dict on one path
            target = self.target(name, depth)
            if self.draw(st.sampled_from(["bound again", "a dict on one path"])) == "bound again":
                self.features.add("loop over a list it binds again")
                again = self.draw(st.sampled_from(["[item * 0.5] + {box}", "{box}[1:] + [item]"]))
                lines = [f"{indent}{box} = [{a}, {b}]",
                         f"{indent}{target} = 0.0",
                         f"{indent}for item in {box}:",
                         f"{indent}    {box} = {again.format(box=box)}",
                         f"{indent}    {target} = {target} * 0.5 + item * {box}[0]"]
            else:
                self.features.add("loop over the list of a list or a dict")
                lines = [f"{indent}if {self.condition()}:",
                         f"{indent}    {box} = {{1: {a}, 0: {b}}}",
                         f"{indent}else:",
                         f"{indent}    {box} = [{a}, {b}]",
                         f"{indent}{target} = 0.0",
                         f"{indent}for item in list({box}):",
                         f"{indent}    {target} = {target} * 0.5 + (item + 1.0) * {a}"]
            return self.scoped(lines, name, depth)
        if self.draw(st.integers(0, 5)) == 0:
            # a slot written anew, then an in-place write of an object another slot (or a name of
            # the list) still sees: Python's list is the same object, its other slots the same
            # arrays
            self.features.add("slot written anew")
            held, alias = self.fresh(), self.fresh()
            target = self.target(name, depth)
            first = self.draw(st.sampled_from(["{h}", "{b}"])).format(h=held, b=b)
            slot = self.draw(st.sampled_from([0, 1]))
            return self.scoped([f"{indent}{held} = np.ones(3) * {a}",
                                f"{indent}{box} = [{held}, {first}]",
                                f"{indent}{alias} = {box}",
                                f"{indent}{box}[{slot}] = np.ones(3) * {b} * 2.0",
                                f"{indent}{held} *= {self.scalar()}",
                                f"{indent}{target} = np.sum({alias}[0] * {box}[1])"], name, depth)
        if self.draw(st.integers(0, 5)) == 0:
            # a list extended in place by ``+=`` (by any iterable), another name of it seeing the
            # new items
            self.features.add("list extended in place")
            alias = self.fresh()
            target = self.target(name, depth)
            extra = self.draw(st.sampled_from(["[{b}]", "({b}, {a} * {b})",
                                               "(v * 0.5 for v in [{a}, {b}])"]))
            return self.scoped([f"{indent}{box} = [{a}]",
                                f"{indent}{alias} = {box}",
                                f"{indent}{box} += {extra.format(a=a, b=b)}",
                                f"{indent}{target} = {alias}[-1] * {box}[0] + len({alias})"],
                               name, depth)
        build, read = self.draw(
            st.sampled_from(
                [
                    ("[{a}, {b}]", "{box}[0] * {box}[-1]"),
                    ("({a}, {b})", "{box}[1] - {box}[0]"),
                    ('{{"p": {a}, "q": {b}}}', '{box}["p"] * {box}["q"]'),
                    ("[{a}] + [{b}]", "{box}[1] * {box}[0]"),
                    ("[{a}] * 2", "{box}[0] + {box}[1]"),
                    ("({a},) + ({b},)", "{box}[0] * {box}[1]"),
                ]
            )
        )
        lines = [
            f"{indent}{box} = {build.format(a=a, b=b)}",
            f"{indent}{name} = {read.format(box=box)}",
        ]
        if depth == 0:
            self.names.append(name)
        else:
            lines[-1] = f"{indent}{self.draw(st.sampled_from(self.names))} = {read.format(box=box)}"
        return lines

    def stmt_choice(self, indent: str, in_loop: bool, depth: int) -> list[str]:
        """``and``/``or`` as values."""
        self.features.add("and/or value")
        self.smooth = False
        test = self.condition()
        name = self.draw(st.sampled_from(self.names))
        if self.options["arrays"]:  # an array's truth value is ambiguous: choose between numbers
            return [f"{indent}{name} = {name} * (({test}) and {self.scalar()} or {self.scalar()})"]
        return [f"{indent}{name} = ({test}) and {self.expr(1)} or {self.expr(1)}"]

    def stmt_complex(self, indent: str, in_loop: bool, depth: int) -> list[str]:
        """Complex intermediates of a real result: a phase, the parts of a square, a spectrum
        scaled and transformed back."""
        self.features.add("complex value")
        name = self.draw(st.sampled_from(self.names))
        other = self.expr(1)
        forms = [
            f"np.abs(np.exp(1j * {other})) * {name}",
            f"np.real(np.exp(1j * {other})) * {name}",
            f"np.imag(({name} + 1j * {other}) ** 2) * 0.5",
            f"np.real(np.conj({name} - 2j) * ({name} + 0.5j * {other}))",
        ]
        if self.options["arrays"]:  # (a name may hold a number: spread over the inputs' shape)
            forms += [
                f"np.real(np.fft.ifft(np.fft.fft({name} * np.ones(3)) * (1.5 + 0.5j))) + {name}",
                f"np.fft.irfft(np.fft.rfft({name} * np.ones(3)) * 0.75, n=3)",
            ]
        return [f"{indent}{name} = {self.draw(st.sampled_from(forms))}"]

    def stmt_damp(self, indent: str, in_loop: bool, depth: int) -> list[str]:
        """A call of a helper that changes its argument in place (inlined: the caller's array
        follows its write), bound again; or with the argument held under another name too, read
        after the call (both names made again; refused in a loop or a branch, where the second name
        was bound outside)."""
        self.features.add("mutating helper")
        name = self.draw(st.sampled_from(self.names))
        if not self.draw(st.booleans()):
            return [f"{indent}{name} = damp({name})"]
        # another name of the argument, read after the helper changed it through its parameter
        other, target = self.fresh(), self.fresh() if depth == 0 else name
        lines = [f"{indent}{other} = {name} * 1.0", f"{indent}{target} = {other}",
                 f"{indent}{target} = damp({target}) + {other}"]
        if depth == 0:
            self.names.append(target)
        return lines

    def result(self, value: str) -> str:
        return f"np.sum({value})" if self.options["arrays"] else value


@st.composite
def programs(draw: Any, arrays: bool | None = None, branches: bool = True, loops: bool = True,
             lists: bool = True, helpers: bool = True, returns: bool = True, matrices: bool = True,
             mutation: bool = False, max_statements: int = 6, written: bool = False) -> Program:
    """A random function ``f`` (and its helpers) in the language ast_ad differentiates.

    Each keyword turns a family of constructs on or off; ``arrays`` picks float or array inputs
    (drawn when ``None``); ``matrices``, with arrays, may start ``f`` with a matrix ``m`` of its
    inputs that expressions multiply by; ``mutation`` adds item writes (repeated and fancy indices,
    ``np.add.at``, ``out=``), writes through aliases and views, containers, ``and``/``or`` values,
    complex intermediates and a helper that changes its argument in place; ``written``, with
    arrays, arrays written out (``np.array([0.5, 2.0, 1])``, of numbers some of which are
    computed), whose shapes the analyses know (``activity.constant_shapes``).
    """
    use_arrays = draw(st.booleans()) if arrays is None else arrays
    options = {
        "arrays": use_arrays,
        "branches": branches,
        "loops": loops,
        "lists": lists,
        "returns": returns,
        "mutation": mutation,
        "written": written,
    }
    arity = draw(st.integers(1, 3))
    params = [f"x{k}" for k in range(arity)]
    writer = _Writer(draw, options)
    source = ["import math", "", "import numpy as np", ""]
    if helpers and draw(st.booleans()):
        writer.names = ["a"]
        for k in range(draw(st.integers(1, 2))):
            inner = writer.expr(1)
            source += [
                "",
                f"def helper{k}(a, scale=0.5):",
                f"    return scale * np.tanh({inner}) + a",
                "",
            ]
            writer.helpers.append(f"helper{k}")
        source += [
            "",
            "def pick(a, b):",
            "    if np.sum(a[0]) > 0.0:",
            "        return a",
            "    return b",
            "",
        ]
    if mutation and draw(st.booleans()):
        if draw(st.booleans()):
            source += ["", "def damp(a):", "    a *= 0.5", "    return a", ""]
        else:  # a closure that changes its argument (inlined with its cell)
            source += ["", "def damper(c):", "    def damp(a):", "        a *= c",
                       "        return a", "", "    return damp", "", "", "damp = damper(0.5)", ""]
        writer.damp = True
    if mutation:  # a closure that gives back a view of its argument (``tail(y)`` is ``y[1:]``)
        source += ["", "def cut(k):", "    def part(a):", "        return a[k:]", "",
                   "    return part", "", "", "tail = cut(1)", ""]
    writer.names = list(params)
    body: list[str] = []
    if use_arrays and matrices and draw(st.booleans()):
        writer.matrix = True
        body.append(f"    m = 0.5 * np.outer(np.tanh(x0), np.cos(x{arity - 1}))")
        source += ["ONES = np.ones(3)", ""]
    body += writer.block("    ", draw(st.integers(1, max_statements)), False, 0)
    final = writer.result(writer.expr())
    source += ["", f"def f({', '.join(params)}):"] + body + [f"    return {final}", ""]
    return Program("\n".join(source), arity, use_arrays, writer.smooth, writer.features)
