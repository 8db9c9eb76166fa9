"""From derived IR to running code: print it as Python (``emit``, ``printer``, ``writer``), load it
(``load``), keep it on disk (``store``), call it cheaply (``scalar_calls``) and compile it (``jit``,
``numba_helpers``)."""
