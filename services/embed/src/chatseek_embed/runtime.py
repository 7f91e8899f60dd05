"""What every local torch backend shares: device and precision choice, batching, checks.

Owns ``PrecisionChoice``, ``resolve_device``, the bf16 calibration and ``plan_batches``; the
sentence-transformers backends (``local``) and the bundled model (``bundled``) both use them.
Invariants:
* ``precision="auto"``: fp16 on mps/cuda; on cpu, bf16 only when the CPU has native bf16 and a
  calibration on ``CALIBRATION_TEXTS`` shows ``BF16_MIN_SPEEDUP`` and agreement with fp32,
  else fp32; ``PrecisionChoice`` says why.
* Batches are length-bucketed under a padded-token budget and cover every input once.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, Self, TypeVar

import numpy as np
import torch

from chatseek_core.errors import FailedPrecondition, InvalidArgument, ModelUnavailable
from chatseek_embed.contract import IdentityLike, unit_rows

__all__ = [
    "BF16_MIN_COSINE",
    "BF16_MIN_SPEEDUP",
    "CALIBRATION_TEXTS",
    "DTYPES",
    "MAX_BATCH_ITEMS",
    "PRECISIONS",
    "RERANK_MIN_AGREEMENT",
    "TOKEN_BUDGET",
    "PrecisionChoice",
    "check_finite",
    "check_precision",
    "cpu_bf16_supported",
    "choose_cpu_precision",
    "explicit_or_default",
    "min_cosine",
    "native_bf16",
    "plan_batches",
    "resolve_device",
    "score_agreement",
    "timed",
]

PrecisionName = Literal["fp32", "bf16", "fp16"]
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
DTYPES: dict[PrecisionName, torch.dtype] = {
    "fp32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}
DEVICES = ("cpu", "cuda", "mps")
TOKEN_BUDGET = {"cpu": 8192, "mps": 16384, "cuda": 65536}
MAX_BATCH_ITEMS = {"cpu": 64, "mps": 128, "cuda": 256}
BUCKET_RATIO = 2
BF16_MIN_COSINE = 0.999
BF16_MIN_SPEEDUP = 1.15
RERANK_MIN_AGREEMENT = 0.99
CALIBRATION_ROUNDS = 2
CALIBRATION_TEXTS = (
    "where did we discuss renting a flat near the river?",
    "Кто-нибудь знает, где сделать ВНЖ быстрее чем за месяц?",
    "invoice for October attached, please pay by Friday",
    "Счёт за электричество пришёл в два раза больше обычного",
    "ok",
    "Спасибо!",
    "The meetup moved to Saturday 18:00, same bar as last time, bring your own board games.",
    "Подскажите хорошего стоматолога в центре, желательно говорящего по-русски или по-английски",
    "[2026-10-01 09:15] Anna: does anyone have a spare bike pump I could borrow this weekend?",
    "Продам детскую коляску, почти новая, самовывоз из района вокзала, цена договорная.",
    "The landlord wants a deposit of three months and a guarantor with a local payslip.",
    "Как перевести деньги из Сербии в Турцию без комиссии за конвертацию?",
    "link to the form: https://example.org/apply?id=2024",
    "Кот потерялся возле парка, рыжий, откликается на Барсик, позвоните пожалуйста",
    "Tax residency question: do remote workers need to file here after 183 days?",
    "Собираемся в субботу на пикник, кто берёт мангал и угли?",
)


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision a model runs in, and why.

    Attributes:
        requested: what was asked for (``auto`` or a precision).
        resolved: what runs (``fp32``, ``bf16`` or ``fp16``).
        reason: one line for logs and status.
        fp32_per_s, bf16_per_s: calibration throughput (texts/s), when calibrated.
        agreement: calibration agreement with fp32 (min cosine, or 1 - score drift).
    """

    requested: str
    resolved: PrecisionName
    reason: str
    fp32_per_s: float | None = None
    bf16_per_s: float | None = None
    agreement: float | None = None


class _Castable(Protocol):
    def to(self, dtype: torch.dtype) -> Self: ...


M = TypeVar("M", bound=_Castable)


def resolve_device(requested: str | None = None) -> str:
    """The torch device to run on: ``requested``, or mps, else cuda, else cpu.

    Raises:
        InvalidArgument: not a cpu/cuda/mps device string.
        FailedPrecondition: the requested accelerator is not available here.
    """
    if requested is None or requested.strip().lower() in ("", "auto"):
        if torch.backends.mps.is_available():
            return "mps"
        if torch.cuda.is_available():
            return "cuda"
        return "cpu"
    device = requested.strip().lower()
    base = device.split(":", 1)[0]
    if base not in DEVICES:
        raise InvalidArgument(
            f"unknown device {requested!r}",
            hint="use cpu, cuda, cuda:N, mps or auto",
            metadata={"field": "device"},
            candidates=list(DEVICES),
        )
    available = {
        "cpu": True,
        "cuda": torch.cuda.is_available(),
        "mps": torch.backends.mps.is_available(),
    }[base]
    if not available:
        raise FailedPrecondition(
            f"device {device} is not available on this machine",
            hint="unset the device setting to pick one automatically",
            metadata={"field": "device", "device": device},
        )
    return device


def check_precision(precision: str) -> str:
    value = precision.strip().lower()
    if value not in PRECISIONS:
        raise InvalidArgument(
            f"unknown precision {precision!r}",
            hint="use auto, fp32, bf16 or fp16",
            metadata={"field": "precision"},
            candidates=list(PRECISIONS),
        )
    return value


def cpu_bf16_supported() -> bool:
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def native_bf16() -> bool:
    """Whether the CPU has bf16 instructions (AVX512-BF16 or AMX), by the kernel's CPU flags.

    Unlike ``cpu_bf16_supported`` (oneDNN can emulate bf16 on any AVX-512 CPU), a CPU with
    these runs bf16 faster than fp32 whatever a timing on a busy machine says.
    """
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        return False
    return False


def plan_batches(lengths: Sequence[int], token_budget: int, max_items: int) -> list[list[int]]:
    """Group input indices into batches of similar length.

    Indices are taken longest first; a batch grows while ``items × its longest length`` (the
    padded size) stays within ``token_budget``, it holds at most ``max_items``, and the next
    input is at least ``1 / BUCKET_RATIO`` of its longest (so short texts are not padded to the
    length of long ones). An input longer than the budget gets a batch of its own.

    Returns:
        Lists of indices into ``lengths``; together they cover every index exactly once.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for index in order:
        if current and (
            len(current) >= max_items
            or (len(current) + 1) * longest > token_budget
            or lengths[index] * BUCKET_RATIO < longest
        ):
            batches.append(current)
            current = []
        if not current:
            longest = max(1, lengths[index])
        current.append(index)
    if current:
        batches.append(current)
    return batches


def check_finite(values: np.ndarray, identity: IdentityLike, precision: PrecisionChoice) -> None:
    if not np.isfinite(values).all():
        raise ModelUnavailable(
            f"model {identity.name} produced non-finite output",
            hint="run it in fp32 (precision setting)",
            metadata={"model": identity.name, "precision": precision.resolved},
        )


def timed(run: Callable[[M], np.ndarray], model: M) -> tuple[np.ndarray, float]:
    run(model)
    best = float("inf")
    out = np.zeros(0, dtype=np.float32)
    for _ in range(CALIBRATION_ROUNDS):
        started = time.perf_counter()
        out = run(model)
        best = min(best, time.perf_counter() - started)
    return out, max(best, 1e-9)


def choose_cpu_precision(
    fp32_model: M,
    run: Callable[[M], np.ndarray],
    agreement: Callable[[np.ndarray, np.ndarray], float],
    min_agreement: float,
) -> tuple[M, PrecisionChoice]:
    if not cpu_bf16_supported():
        return fp32_model, PrecisionChoice("auto", "fp32", "this CPU has no native bf16")
    candidate = copy.deepcopy(fp32_model).to(torch.bfloat16)
    reference, fp32_s = timed(run, fp32_model)
    result, bf16_s = timed(run, candidate)
    count = len(CALIBRATION_TEXTS)
    agree = agreement(reference, result)
    speedup = fp32_s / bf16_s
    numbers = {
        "fp32_per_s": count / fp32_s,
        "bf16_per_s": count / bf16_s,
        "agreement": agree,
    }
    if agree >= min_agreement and speedup >= BF16_MIN_SPEEDUP:
        reason = f"bf16 is {speedup:.2f}x faster with agreement {agree:.5f}"
        return candidate, PrecisionChoice("auto", "bf16", reason, **numbers)
    if agree < min_agreement:
        reason = f"bf16 agreement {agree:.5f} is below {min_agreement}"
    else:
        reason = f"bf16 is only {speedup:.2f}x faster"
    return fp32_model, PrecisionChoice("auto", "fp32", reason, **numbers)


def min_cosine(reference: np.ndarray, candidate: np.ndarray) -> float:
    a, b = unit_rows(reference), unit_rows(candidate)
    return float(np.min(np.sum(a * b, axis=1)))


def score_agreement(reference: np.ndarray, candidate: np.ndarray) -> float:
    spread = max(1.0, float(np.ptp(reference)))
    return 1.0 - float(np.max(np.abs(reference - candidate))) / spread


def explicit_or_default(requested: str, device: str) -> PrecisionChoice | None:
    """The precision decided without calibration, or None when cpu ``auto`` must calibrate."""
    if requested != "auto":
        return PrecisionChoice(requested, requested, "requested")  # type: ignore[arg-type]
    if device.startswith(("cuda", "mps")):
        return PrecisionChoice("auto", "fp16", f"fp16 is the default on {device}")
    return None
