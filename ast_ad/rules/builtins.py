"""Rules for Python builtins that numeric code calls on differentiated values."""

import builtins
import operator

import numpy as np

from ast_ad.core.registry import (
    Rule,
    def_check,
    def_effect,
    def_full_reduction,
    def_guard,
    def_holds_items,
    def_identity_read,
    def_linear,
    def_new_list,
    def_nondiff,
    def_numbers_pass,
    def_passes_on_numbers,
    def_remakes,
    def_result_axes,
    def_same_kind,
    def_sequence,
    def_shape_of,
    def_view,
    defjvp,
    defvjp,
    lookup,
    zero,
)
from ast_ad.core.registry import defvjp_elementwise as ew
from ast_ad.runtime import (
    absent,
    augmented,
    augmented_value,
    augmented_vjp,
    check_bound,
    check_gradient_layout,
    check_gradient_value,
    check_in_place,
    check_item_apart,
    check_jvp_layout,
    check_kept,
    chosen,
    chosen_jvp,
    chosen_vjp,
    concat,
    concat_vjp_a,
    concat_vjp_b,
    field,
    field_vjp,
    first_best,
    gradient_like,
    gradients_like,
    is_same,
    key_tangent,
    keys_of,
    list_item,
    list_item_vjp,
    list_jvp,
    part,
    repeat_seq,
    repeat_seq_vjp,
    replaced,
    replaced_jvp_new,
    replaced_vjp_container,
    replaced_vjp_new,
    sequence_vjp,
    shared,
    slots_changed,
    slots_holding,
    sorted_by,
    sorted_by_vjp,
    spread,
    tuple_jvp,
    unbroadcast,
    view_of,
    view_probe,
    zero_tangent,
)


def _registered(fn: object) -> Rule:
    """The rule registered above for ``fn`` (to share its definition with another function)."""
    rule = lookup(fn)
    assert rule is not None
    return rule

ew(builtins.float, lambda g, ans, x: g)
ew(builtins.abs,   lambda g, ans, x: g * np.sign(x))
defvjp(builtins.sum, lambda g, ans, xs, start=0: spread(g, xs), lambda g, ans, xs, start: g)

# pow(x, y) is x ** y: one definition of the derivative
ew(builtins.pow, *_registered(operator.pow).vjps)
ew(builtins.divmod, lambda g, ans, x, y: part(g, 1), lambda g, ans, x, y: -part(g, 1) * ans[0])

# min and max return the chosen argument itself: it takes the whole adjoint (the first, at ties)
defvjp(builtins.min, lambda g, ans, *xs: chosen_vjp(0, g, ans, xs),
                     lambda g, ans, *xs: chosen_vjp(1, g, ans, xs),
                     lambda g, ans, *xs: chosen_vjp(2, g, ans, xs),
                     lambda g, ans, *xs: chosen_vjp(3, g, ans, xs))
defvjp(builtins.max, *_registered(builtins.min).vjps)

defvjp(field, lambda g, ans, obj, name: field_vjp(g, obj, name))
defjvp(field, lambda u, ans, obj, name: field(u, name))  # a namedtuple's tangent is one of its type

# lists and tuples joined (a + b) and repeated (a * n): their adjoints split and add element by
# element
defvjp(
    concat, lambda g, ans, a, b: concat_vjp_a(g, a, b), lambda g, ans, a, b: concat_vjp_b(g, a, b)
)
defvjp(repeat_seq, lambda g, ans, a, n: repeat_seq_vjp(g, a, n))
defvjp(list_item, lambda g, ans, xs, index, n: list_item_vjp(g, xs, index, n))
defvjp(sorted_by, lambda g, ans, xs, keys, reverse=False: sorted_by_vjp(g, xs, keys, reverse), zero)
def_sequence(concat, repeat_seq, sorted_by, builtins.divmod)
# list(xs), tuple(xs) and dict(d): the same items in a new container (an array's rows); linear,
# their adjoints the items'
for _maker in (builtins.list, builtins.tuple, builtins.dict):
    defvjp(_maker, lambda g, ans, x: sequence_vjp(g, x))
    def_linear(_maker, 0)
# (but list(d) and tuple(d) of a dict are its keys, which carry no derivative)
defjvp(builtins.list, lambda u, ans, x: list_jvp(u, x))
defjvp(builtins.tuple, lambda u, ans, x: tuple_jvp(u, x))
def_sequence(builtins.list, builtins.tuple)
def_same_kind(builtins.dict)  # a dict, as its argument
def_new_list(builtins.list, concat, sorted_by)  # (a function may pop such a list: it is its own)
# new containers (or iterators) of the very objects their arguments hold: writes into those items
# are guarded
def_holds_items(concat, repeat_seq, sorted_by, builtins.list, builtins.tuple, builtins.dict,
                builtins.reversed, builtins.iter, builtins.zip, builtins.enumerate,
                builtins.filter, builtins.map)

# ---- forward mode (elementwise functions need nothing here) --------------------------------------
# sum's tangent has its result's shape even when it adds no terms (``0.0 * ans``)
defjvp(builtins.sum,    lambda u, ans, xs, start=0: sum(u, 0.0 * ans), lambda u, ans, xs, start: u)
defjvp(
    builtins.divmod, lambda u, ans, x, y: (0.0 * u, u), lambda u, ans, x, y: (0.0 * u, -u * ans[0])
)
defjvp(
    builtins.min,
    lambda u, ans, *xs: chosen_jvp(0, u, ans, xs),
    lambda u, ans, *xs: chosen_jvp(1, u, ans, xs),
    lambda u, ans, *xs: chosen_jvp(2, u, ans, xs),
    lambda u, ans, *xs: chosen_jvp(3, u, ans, xs),
)
defjvp(builtins.max,    *_registered(builtins.min).jvps)
defjvp(
    concat,
    lambda u, ans, a, b: concat(u, zero_tangent(b)),
    lambda u, ans, a, b: concat(zero_tangent(a), u),
)
for _fn in (repeat_seq, list_item, sorted_by):
    def_linear(_fn, 0)
defjvp(list_item, None, zero, zero)

def_effect(builtins.print)
def_full_reduction(builtins.float)  # float(x): a number

# guards before writes: no gradient
def_nondiff(absent, check_in_place, check_item_apart, check_kept, view_of)
def_nondiff(check_bound)  # a read of a name no assignment may have bound yet (``unbound``)
# (each raises where the code cannot go on as Python does: never left out as unread)
def_check(check_in_place, check_item_apart, check_kept, check_bound, key_tangent)
def_nondiff(check_jvp_layout)  # (a jvp lowered in place: its arguments what its code was made for)
def_check(check_jvp_layout)
# (a gradient lowered in place: its arguments what its code was made for, its value a number)
def_nondiff(check_gradient_layout, check_gradient_value)
def_check(check_gradient_layout, check_gradient_value)
def_passes_on_numbers(check_gradient_value, 1)
# ... and its gradient as ``grad`` returns it: the same numbers, a float or an array of its own
defvjp(gradient_like, lambda g, ans, grads, x: unbroadcast(g, grads), zero)
def_linear(gradient_like, 0)
def_shape_of(gradient_like, 1, positional=2)
defvjp(gradients_like, lambda g, ans, grads, xs: g, zero)
def_linear(gradients_like, 0)
def_sequence(gradients_like)
def_nondiff(keys_of)  # a dict's keys, which a loop over its items steps through
def_nondiff(key_tangent)  # zeros, or a refusal of a float key
# whether two names are one object, a view to compare (the memory model's)
def_nondiff(is_same, view_probe)
def_guard(is_same, 0)  # (they read a name only to ask about memory: one not bound yet sees nothing)
def_guard(view_probe, 0)
def_nondiff(first_best)  # the position max(xs, key=f) picks
# a container with a changed object in every slot that held it (``pair = [y, y]; pair[0][1] = v``)
defvjp(replaced, lambda g, ans, c, slots, new: replaced_vjp_container(g, c, slots), zero,
       lambda g, ans, c, slots, new: replaced_vjp_new(g, new, slots))
defjvp(replaced, lambda u, ans, c, slots, new: replaced_vjp_container(u, c, slots), zero,
       lambda u, ans, c, slots, new: replaced_jvp_new(u, c, slots))
# the slots that hold the changed object (no other sees it: checked)
def_nondiff(slots_holding, slots_changed)
# ``xs[k] += v``: the item itself changed where it is an array (its shape and dtype), else the new
# value
defvjp(augmented, zero, lambda g, ans, old, new: augmented_vjp(g, ans, old, new))
defjvp(augmented, zero, lambda u, ans, old, new: augmented(zero_tangent(ans), u))
def_linear(augmented_vjp, 0)
def_same_kind(augmented, argnums=(1,))  # (``xs[k] += [v]`` on a list in a list: the list it makes)
def_same_kind(augmented_vjp, argnums=(3,))
defvjp(
    augmented_vjp, lambda w, a, g, ans, old, new: augmented(zero_tangent(ans), w), zero, zero, zero
)
# ``y += v`` on a name: ``new``'s entries in ``y``'s dtype where ``y`` is a numpy array (Python's
# ``+=`` writes into it; numpy raises unless ``new`` has ``y``'s very shape), else ``new`` itself:
# of ``new``'s shape either way, so its rules are ``g`` and ``u``; ``old`` gives its dtype alone;
# given numbers, ``new``; its result may be ``new`` itself
defvjp(augmented_value, lambda g, ans, new, old: g, zero)
defjvp(augmented_value, lambda u, ans, new, old: u, zero)
def_numbers_pass(augmented_value)
def_view(augmented_value)
def_result_axes(augmented_value, lambda ranks: None if not ranks or ranks[0] is None
                else tuple((0, axis) for axis in range(ranks[0])))
def_same_kind(replaced)  # a list, tuple or dict, as its container
# (and so its tangents: ``+`` of the two would join two tuples, where the kind of the container is
# not known, a tuple read from a list)
def_same_kind(replaced_vjp_container, argnums=(0, 1))
def_same_kind(replaced_jvp_new, argnums=(1,))
# the entries a branch of np.where is selected at: the derivative flows there, and is zero elsewhere
ew(
    chosen,
    None,
    lambda g, ans, c, x, keep: np.where(c, g, 0.0) if keep else np.where(c, 0.0, g),
    None,
)
defjvp(
    chosen,
    None,
    lambda u, ans, c, x, keep: np.where(c, u, 0.0) if keep else np.where(c, 0.0, u),
    None,
)
# the other names' objects, compared with the one about to change
def_identity_read(check_in_place, 1)
def_guard(check_in_place, 0)  # the object about to change, which another live name may also reach
# likewise, where the other name is followed: it is the changed object, or a view of it
def_guard(view_of, 0)
# the object about to change, whose slots in a container are asked (a copy has none)
def_guard(slots_holding, 1)
def_guard(slots_changed, 2)
def_view(list_item)  # xs[i] of a list: the very object the list holds

# arrays that share memory as no recipe says, followed through a write by their entries' places
# (``runtime.shared``): which share what is asked before the write, the root written and each made
# again from it after; linear in the arrays they take
def_nondiff(shared.shared_family)
def_guard(shared.shared_family, 0)
def_identity_read(shared.shared_family, 1)
defvjp(
    shared.memory_root,
    zero,
    lambda g, ans, plan, new, family: shared.memory_root_vjp_new(g, plan, new),
    lambda g, ans, plan, new, family: shared.memory_root_vjp_family(g, plan, family),
)
defjvp(
    shared.memory_root,
    zero,
    lambda u, ans, plan, new, family: shared.memory_root_jvp_new(u, plan, ans),
    lambda u, ans, plan, new, family: shared.memory_root_jvp_family(u, plan, new),
)
defvjp(
    shared.memory_view,
    zero,
    zero,
    lambda g, ans, plan, key, root, old: shared.memory_view_vjp_root(g, plan, key, root),
    lambda g, ans, plan, key, root, old: shared.memory_view_vjp_old(g, plan, key, old),
)
defjvp(
    shared.memory_view,
    zero,
    zero,
    lambda u, ans, plan, key, root, old: shared.memory_view_jvp_root(u, plan, key, old),
    # (its own transpose: the same entries kept)
    lambda u, ans, plan, key, root, old: shared.memory_view_vjp_old(u, plan, key, old),
)
def_same_kind(shared.memory_view, argnums=(3,))  # a container where the old value is one
# (a name not bound yet, ``None``, is in no plan: it stays as it was, not bound)
def_remakes(shared.memory_view, 3)
def_remakes(shared.memory_root, None, others=2)
def_remakes(shared.shared_family, None, others=1)
def_same_kind(shared.memory_root, argnums=(1,))  # (a list written into: the new list)
def_nondiff(builtins.len, builtins.int, builtins.bool, builtins.round, builtins.range,
            builtins.slice, builtins.isinstance, builtins.type)
