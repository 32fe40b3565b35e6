"""Embedding vectors and the invariants every vector that crosses a boundary must keep.

Every vector that leaves an encoder, is read from a cache or is handed to the router is checked by
:func:`check_vectors`: right shape and dimension, finite, unit length.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from state.errors import CoeError

__all__ = ["NORM_TOLERANCE", "VectorInvariantError", "Vectors", "check_vectors", "load_vectors"]

Vectors = npt.NDArray[np.float32]

NORM_TOLERANCE = 1e-3
"""How far from 1.0 a vector's L2 norm may be (float32 rounding is ~1e-7; anything bigger is a bug)."""
CHECK_BLOCK = 16_384
"""Rows checked at a time (a knowledge base's 185,000 vectors would need 570 MB of float64 at once)."""


class VectorInvariantError(CoeError):
    """A vector that breaks an invariant (dimension, finiteness, unit norm) reached a boundary."""

    def __init__(self, where: str, message: str) -> None:
        self.where = where
        super().__init__(f"{where}: {message}")


def check_vectors(vectors: Any, dim: int, where: str) -> Vectors:
    """Fail fast unless ``vectors`` is a finite, L2-normalised float32 matrix of shape (n, dim).

    Args:
        vectors: The array to check (a 1-D vector is accepted and returned as one row).
        dim: The dimension every vector must have.
        where: The boundary, named in the error (e.g. ``"expert index capability vectors"``).

    Returns:
        The same data as a C-contiguous float32 matrix.

    Raises:
        VectorInvariantError: naming ``where``, the row and what is wrong.
    """
    arr = np.asarray(vectors)
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2:
        raise VectorInvariantError(where, f"expected a matrix of vectors, got an array of shape {arr.shape}")
    if arr.shape[1] != dim:
        raise VectorInvariantError(where, f"vectors have dimension {arr.shape[1]}, expected {dim}")
    if not np.issubdtype(arr.dtype, np.floating):
        raise VectorInvariantError(where, f"vectors have dtype {arr.dtype}, expected floating point")
    for first in range(0, arr.shape[0], CHECK_BLOCK):  # in blocks: the float64 copy of a big matrix is not made
        block = arr[first : first + CHECK_BLOCK]
        finite = np.isfinite(block).all(axis=1)
        if not finite.all():
            row = first + int(np.argmin(finite))
            raise VectorInvariantError(where, f"vector {row} has a NaN or infinite component")
        norms = np.linalg.norm(block.astype(np.float64), axis=1)
        bad = np.abs(norms - 1.0) > NORM_TOLERANCE
        if bad.any():
            row = int(np.argmax(bad))
            raise VectorInvariantError(
                where, f"vector {first + row} has L2 norm {norms[row]:.6f}, expected 1 (normalise it)"
            )
    return np.ascontiguousarray(arr, dtype=np.float32)


def load_vectors(path: Path, dim: int, rows: int | None = None) -> Vectors:
    """The vectors ``np.save`` wrote at ``path``, held to :func:`check_vectors` (and to ``rows`` rows, if given).

    Raises:
        OSError: the file cannot be read.
        ValueError: it is no NumPy array file.
        VectorInvariantError: naming ``path``: a vector breaks an invariant, or the file holds another number of rows.
    """
    vectors = check_vectors(np.load(path, allow_pickle=False), dim, str(path))
    if rows is not None and vectors.shape[0] != rows:
        raise VectorInvariantError(str(path), f"{vectors.shape[0]} vectors, expected {rows}")
    return vectors
