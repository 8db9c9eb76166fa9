"""Objects of the user's classes made inside the differentiated function (``test_objects``)."""

import dataclasses

import numpy as np


@dataclasses.dataclass
class Lin:
    w: float
    b: float

    def __call__(self, t):
        return self.w * t + self.b

    @property
    def slope(self):
        return self.w


def dataclass_with_call_and_property(x):
    m = Lin(x[0], x[1])
    return m(x[2]) + m.slope


class Base:
    scale = 2.0

    def __init__(self, a):
        self.a = a

    def val(self, t):
        return self.a * t * self.scale


class Child(Base):
    def __init__(self, a):
        super().__init__(a * 2.0)
        self.count = 0

    @classmethod
    def make(cls, a):
        return cls(a)

    def bump(self, v):
        self.a = self.a + v
        self.count += 1


def inheritance_super_classmethod(x):
    c = Child.make(x[0])
    c.bump(x[1])
    d = c
    d.bump(x[2])
    return c.val(x[1]) + c.count


class Acc:
    def __init__(self):
        self.total = 0.0

    def add(self, v):
        self.total = self.total + v * v


def attribute_in_a_loop_and_branch(x):
    acc = Acc()
    for i in range(3):
        if x[i] > 0:
            acc.add(x[i])
    return acc.total


def returns_the_object(x):
    m = Lin(x[0], x[1])
    return m  # escapes


def passes_the_object(x):
    m = Lin(x[0], x[1])
    return np.sum(describe(m))  # describe is inlined: what it reads of m is followed


def describe(obj):
    return obj.w


class Holder:
    def __init__(self, w):
        self.w = w

    def scale(self, s):
        self.w *= s
        return self.w


def attribute_sees_a_write(x):
    W = x * 1.0
    m = Holder(W)
    W[0] = 5.0
    return np.sum(m.w * x)


def method_writes_what_a_name_sees(x):
    W = x * 1.0
    m = Holder(W)
    m.scale(2.0)
    return np.sum(W * x)


def applied(layer, t):
    return layer(t) * 2.0


def objects_in_a_list_passed_to_a_function(x):
    layers = [Lin(x[0], x[1]), Lin(x[2], 0.5)]
    h = x[1]
    for layer in layers:  # unrolled: each object followed
        h = np.tanh(applied(layer, h))
    return h + layers_sum(Lin(h, x[0]))


def layers_sum(layer):
    return layer.w * layer.b + layer.slope


def a_list_of_objects_used_as_a_value(x):
    layers = [Lin(x[0], x[1]), Lin(x[2], 0.5)]
    return layers_total(layers) * x[0]  # refused: layers is a list of objects made here


def layers_total(layers):
    return sum(layer.w for layer in layers)


def make_lin(w, b):
    return Lin(w * 2.0, b)


def make_named(w):
    m = Lin(w, 1.0)
    return m


def objects_functions_make(x):
    m = make_lin(x[0], x[1])  # inlined: the object is made here
    n = make_named(x[2])
    return m(x[1]) + n(x[0]) * m.slope


def objects_in_a_list_by_position(x):
    layers = [Lin(x[0], x[1]), Lin(x[2], 0.5), Lin(x[1], x[0])]
    h = x[1]
    for k in range(len(layers)):  # unrolled: layers[k] is each object in turn
        h = np.tanh(layers[k](h))
    for k, layer in enumerate(layers):
        h = h + k * layer.w
    return h * layers[-1].b + layers[0](x[2]) + len(layers)
