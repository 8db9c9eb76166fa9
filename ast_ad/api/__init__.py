"""What users call: gradients (``gradient``), forward mode, Jacobians, Hessians and their
compositions (``compose``, over ``lowering``), export of a gradient as a module (``export``), and
the derivatives of scipy's solvers, made of them (``solvers``, registered when code names
scipy)."""

from ast_ad.core import registry

registry.def_lazy_rules("scipy", "ast_ad.api.solvers")
