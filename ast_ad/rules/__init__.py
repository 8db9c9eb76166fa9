"""Rule tables, one module per library they cover. Importing this package registers them all."""

from ast_ad.rules import builtins, linalg, math, numpy, operator, scipy  # noqa: F401  (registers the rules)
