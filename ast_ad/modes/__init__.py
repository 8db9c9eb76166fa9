"""The transformations: forward mode (``forward``) and reverse mode (``reverse`` and its parts: the
forward sweep, saving and restoring, checkpointing, accumulation, calls of other functions, writes),
and templates written in ast_ad's own language (``templates``)."""
