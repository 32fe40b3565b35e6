"""Graph nodes: one module per node; each takes the Passport and returns a partial update."""

from nodes.adapt_template import adapt_template
from nodes.answer_directly import answer_directly
from nodes.ask_plan_fit import ask_plan_fit
from nodes.ask_user import ask_user
from nodes.assemble import assemble
from nodes.check_parts import check_parts
from nodes.complete import complete
from nodes.confirm_plan import confirm_plan
from nodes.execute_slots import aexecute_slots, execute_slots
from nodes.guard import guard
from nodes.refuse_input import refuse_input
from nodes.route_slots import route_slots
from nodes.scope import scope
from nodes.select_template import select_template

__all__ = [
    "adapt_template",
    "aexecute_slots",
    "answer_directly",
    "ask_plan_fit",
    "ask_user",
    "assemble",
    "check_parts",
    "complete",
    "confirm_plan",
    "execute_slots",
    "guard",
    "refuse_input",
    "route_slots",
    "scope",
    "select_template",
]
