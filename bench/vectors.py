"""Synthetic 384-d unit vectors for the KNN benchmark: MiniLM-like clusters and the worst case.

``clustered`` mimics all-MiniLM-L6-v2 embeddings of ``bench.generate`` texts (measured on 6,000
of them: norm of the mean vector 0.57, mean pairwise cosine 0.33, median cosine of the nearest
neighbour 0.90 and of the 10th 0.85, sign bits far from balanced; these give 0.57, 0.32, 0.90 and
0.84): a large shared component, topic clusters of Zipf-distributed sizes and a decaying
spectrum. ``gaussian`` is isotropic noise, where sign bits
carry the least. Both are deterministic by seed and built in blocks to bound memory.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DIM", "clustered", "gaussian"]

DIM = 384
SHARED_NORM = 0.8
SPECTRUM_DECAY = 0.75
NOISE_SCALE = 0.8
CLUSTER_SIZE = 40  # vectors per topic cluster on average
CLUSTER_ZIPF_S = 0.8
BLOCK = 100_000


def clustered(n: int, seed: int, *, dim: int = DIM) -> np.ndarray:
    """``n`` unit vectors shaped like MiniLM embeddings of chat messages (float32)."""
    rng = np.random.default_rng(seed)
    shared = rng.standard_normal(dim)
    shared *= SHARED_NORM / np.linalg.norm(shared)
    spectrum = np.arange(1, dim + 1, dtype=np.float64) ** -SPECTRUM_DECAY
    spectrum /= np.linalg.norm(spectrum)
    basis, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
    clusters = max(8, n // CLUSTER_SIZE)
    sizes = 1.0 / np.arange(1, clusters + 1) ** CLUSTER_ZIPF_S
    centres = (shared + (rng.standard_normal((clusters, dim)) * spectrum) @ basis.T).astype(
        np.float32
    )
    member = rng.choice(clusters, size=n, p=sizes / sizes.sum())
    out = np.empty((n, dim), dtype=np.float32)
    mix = (basis * spectrum * NOISE_SCALE).T.astype(np.float32)
    for start in range(0, n, BLOCK):
        stop = min(n, start + BLOCK)
        block = centres[member[start:stop]]
        block += rng.standard_normal((stop - start, dim), dtype=np.float32) @ mix
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start:stop] = block
    return out


def gaussian(n: int, seed: int, *, dim: int = DIM) -> np.ndarray:
    """``n`` isotropic Gaussian unit vectors (float32): the worst case for sign bits."""
    rng = np.random.default_rng(seed)
    out = rng.standard_normal((n, dim), dtype=np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out
