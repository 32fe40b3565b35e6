"""Graph nodes: one module per node; each takes the Passport and returns a partial update."""

from nodes.assemble import assemble
from nodes.execute_slots import execute_slots
from nodes.guard import guard
from nodes.route_slots import route_slots
from nodes.select_template import select_template

__all__ = ["assemble", "execute_slots", "guard", "route_slots", "select_template"]
