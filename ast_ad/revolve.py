"""Binomial checkpointing's schedule (``ast_ad.runtime.revolve``, under its public name)."""

from ast_ad.runtime.revolve import auto_snapshots, forward_steps, revolve, schedule

__all__ = ["auto_snapshots", "forward_steps", "schedule", "revolve"]
