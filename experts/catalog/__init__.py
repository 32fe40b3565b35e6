"""The expert catalog: scope documents (who each expert is, shipped, added or installed) and their model bindings."""

from experts.catalog.binding import Binding, BindingKind, escalation_binding, prepare_models, resolve_binding
from experts.catalog.chat import expert_chat_model
from experts.catalog.scopes import GENERAL_EXPERT, Catalog, ExpertOrigin, ExpertScope, ModelBinding
from experts.catalog.sources import add_expert, load_catalog, read_expert_dir, remove_expert

__all__ = [
    "GENERAL_EXPERT",
    "Binding",
    "BindingKind",
    "Catalog",
    "ExpertOrigin",
    "ExpertScope",
    "ModelBinding",
    "add_expert",
    "escalation_binding",
    "expert_chat_model",
    "load_catalog",
    "prepare_models",
    "read_expert_dir",
    "remove_expert",
    "resolve_binding",
]
