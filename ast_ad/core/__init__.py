"""The bottom layer: the rule registry's data (``registry``), the records every layer builds
(``records``) and logging (``logs``). It imports no other part of ast_ad but ``errors``."""
