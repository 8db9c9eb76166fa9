"""Binomial checkpointing's schedule (``ast_ad.runtime.revolve``, under its public name)."""

from ast_ad.runtime.revolve import forward_steps, revolve, schedule

__all__ = ["forward_steps", "schedule", "revolve"]
