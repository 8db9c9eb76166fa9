"""From the user's function to the IR: read its source (``parse``), check it against the supported
language (``check``, ``structure``), and lower it to A-normal form (``normalize`` and its parts:
calls, control flow, expressions, writes, objects, transformations written in a body), asking the
memory model (``aliasing``) where a value may be shared."""
