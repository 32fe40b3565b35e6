"""The expert catalog: scope documents (who each expert is) and their model bindings (which model runs it)."""

from experts.catalog.binding import Binding, BindingKind, escalation_binding, resolve_binding
from experts.catalog.chat import expert_chat_model
from experts.catalog.scopes import GENERAL_EXPERT, Catalog, ExpertScope, ModelBinding, load_catalog

__all__ = [
    "GENERAL_EXPERT",
    "Binding",
    "BindingKind",
    "Catalog",
    "ExpertScope",
    "ModelBinding",
    "escalation_binding",
    "expert_chat_model",
    "load_catalog",
    "resolve_binding",
]
