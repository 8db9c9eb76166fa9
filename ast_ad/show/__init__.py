"""Showing the work: evaluation traces (``explain``), the computational graph (``graph``), the HTML
page (``page``) and the registry's coverage (``coverage``)."""
