"""Rule tables, one module per library they cover. Importing this package registers them all."""

from ast_ad.rules import operator, builtins, linalg, math, numpy, scipy  # noqa: F401, I001  (registers the rules; operator first, builtins reuse its derivatives)
