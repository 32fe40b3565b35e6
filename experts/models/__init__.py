"""The model files experts run on: the bundled GGUF models (verified, assembled from packages) and their shapes."""

from experts.models.bundled import BUNDLED_MODELS, DEFAULT_MODEL, resolve_model_path

__all__ = ["BUNDLED_MODELS", "DEFAULT_MODEL", "resolve_model_path"]
