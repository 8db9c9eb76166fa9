"""What users call: gradients (``gradient``), forward mode, Jacobians, Hessians and their
compositions (``compose``, over ``lowering``), export of a gradient as a module (``export``)."""
