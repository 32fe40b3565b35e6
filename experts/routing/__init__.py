"""Where work goes: the dual-embedding router, template retrieval, and scoping a task."""

from experts.routing.router import DEFAULT_PARAMS, ExpertRouter, RouteResult, RouterParams, get_router
from experts.routing.scoping import classify
from experts.routing.templates import AS_IS_SIMILARITY, TemplateHit, TemplateIndex, library, library_dir

__all__ = [
    "AS_IS_SIMILARITY",
    "DEFAULT_PARAMS",
    "ExpertRouter",
    "RouteResult",
    "RouterParams",
    "TemplateHit",
    "TemplateIndex",
    "classify",
    "get_router",
    "library",
    "library_dir",
]
