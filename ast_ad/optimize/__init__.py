"""Passes over derived code that keep what it computes: folding and inlining (``fold``), batched
products (``batching``), and releasing what nothing reads again (``release``)."""
