"""Rule tables, one module per library they cover. Importing this package registers them.

The rules of optional libraries (``scipy.py``) are registered when the user's code first names the
library (``registry.load_rules_for``), so ``import ast_ad`` does not import them.
"""

# importing them registers the rules (operator first: builtins reuse its derivatives)
from ast_ad.rules import operator, builtins, linalg, math, numpy, runtime, spectral  # noqa: F401, I001
from ast_ad.rules import batched  # noqa: F401
