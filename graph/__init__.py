"""The compiled College of Experts graph: ``from graph import build_graph``."""

from graph.builder import build_graph
from graph.persistence import open_async_checkpointer, open_checkpointer, open_store

__all__ = ["build_graph", "open_async_checkpointer", "open_checkpointer", "open_store"]
