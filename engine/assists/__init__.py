"""Assists: resolving ``{{ASSIST:...}}`` requests, asking the person, and keeping untrusted text as data."""

from engine.assists.asking import ask
from engine.assists.resolver import AssistResolver, Resolution

__all__ = ["AssistResolver", "Resolution", "ask"]
