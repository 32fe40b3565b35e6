"""The expert catalog: scope documents (who each expert is) and their model bindings (which model runs it)."""

from experts.catalog.binding import Binding, BindingKind, escalation_binding, resolve_binding
from experts.catalog.scopes import GENERAL_EXPERT, Catalog, ExpertScope, ModelBinding, load_catalog

__all__ = [
    "GENERAL_EXPERT",
    "Binding",
    "BindingKind",
    "Catalog",
    "ExpertScope",
    "ModelBinding",
    "escalation_binding",
    "load_catalog",
    "resolve_binding",
]
