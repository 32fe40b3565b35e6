"""Sentence embeddings for routing and retrieval: the bundled all-MiniLM-L6-v2 model and vector indexes."""

from experts.embedding.encoder import BertSentenceEncoder, Embedder, bert_config
from experts.embedding.factory import EMBED_BACKENDS, get_embedder
from experts.embedding.faiss_index import HNSW_FROM, build_faiss_index
from experts.embedding.model_files import default_model_dir, verify_model_files
from experts.embedding.vectors import VectorInvariantError, Vectors, check_vectors

__all__ = [
    "EMBED_BACKENDS",
    "HNSW_FROM",
    "BertSentenceEncoder",
    "Embedder",
    "VectorInvariantError",
    "Vectors",
    "bert_config",
    "build_faiss_index",
    "check_vectors",
    "default_model_dir",
    "get_embedder",
    "verify_model_files",
]
