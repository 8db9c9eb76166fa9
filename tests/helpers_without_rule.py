"""A function whose source ast_ad cannot read: a compiled builtin stands in for a C extension."""

import math

opaque = math.gamma
