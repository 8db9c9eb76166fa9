"""The runtime tracer, ast_ad's independent oracle (``ast_ad.testing.tracer``, under its public
name)."""

from ast_ad.testing.tracer import grad, jvp, value_and_grad

__all__ = ["grad", "value_and_grad", "jvp"]
