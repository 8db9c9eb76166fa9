"""Facts read from the IR, before any derivative is written: which names are active (``activity``),
what kind each value is (``kinds``), which names may be unbound (``unbound``), which loops write
arrays in place and which can be checkpointed (``activity``)."""
