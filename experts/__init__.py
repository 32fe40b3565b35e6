"""Experts: who they are, how work reaches them, and the models they run on.

* :mod:`experts.catalog`: the scope documents (who each expert is) and model bindings (which model it runs on);
* :mod:`experts.embedding`: the bundled sentence encoder (ONNX, NumPy, a static table) and vector indexes;
* :mod:`experts.routing`: the dual-embedding router, its cached index and learned term, template retrieval and
  scoping;
* :mod:`experts.models`: the model pool (memory budget, residency, circuit breakers) and its backends
  (llama.cpp in-process, a remote OpenAI-compatible server, a scripted fake), bundled models, grammars;
* :mod:`experts.knowledge`: the knowledge base behind lookup assists (ingest, store, quotes).

Inside, layers point down: ``knowledge`` and ``routing`` use ``embedding`` and ``catalog``; ``catalog`` uses
``models``; ``models`` and ``embedding`` use only :mod:`state` (``pyproject.toml``, ``[tool.importlinter]``).
"""
