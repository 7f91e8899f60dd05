"""Where an export is on disk: its JSON file, its folder, safe media paths, its slug.

Invariants: a media path never escapes the export folder (no absolute path, ``..``, NUL or
symlink out of it); a slug is stable for the same folder name or chat title.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

from chatseek_core.errors import MalformedExport, NotFound
from chatseek_ingest.export.arriving import ArrivingFile, Growth
from chatseek_ingest.export.parser import JsonFile

__all__ = [
    "EXPORT_FILE_NAMES",
    "ExportSource",
    "export_slug",
    "malformed",
    "open_export",
    "path_problem",
    "resolve_media",
]

MAX_SLUG_CHARS = 48
SLUG_HASH_CHARS = 8
EXPORT_FILE_NAMES = ("result.json", "messages.json")

_SLUG_JUNK_RE = re.compile(r"[^a-z0-9]+")
_CYRILLIC_LATIN = {
    "а": "a", "б": "b", "в": "v", "г": "g", "д": "d", "е": "e", "ё": "e", "ж": "zh",
    "з": "z", "и": "i", "й": "y", "к": "k", "л": "l", "м": "m", "н": "n", "о": "o",
    "п": "p", "р": "r", "с": "s", "т": "t", "у": "u", "ф": "f", "х": "kh", "ц": "ts",
    "ч": "ch", "ш": "sh", "щ": "shch", "ъ": "", "ы": "y", "ь": "", "э": "e", "ю": "yu",
    "я": "ya", "і": "i", "ї": "yi", "є": "ye", "ґ": "g", "ў": "u",
}  # fmt: skip
_TRANSLIT = str.maketrans(_CYRILLIC_LATIN)


@dataclass(frozen=True, slots=True)
class ExportSource:
    """An export located on disk.

    Attributes:
        json_path: the JSON file to stream.
        root: the export folder; media paths are relative to it and must stay inside it.
        size: the JSON file's size in bytes when opened.
        label: how warnings and errors name the file (the user's own path when the service
            reads an uploaded copy); ``json_path`` when empty.
        growth: set while the JSON file is still arriving (an upload read as it comes): reads
            wait on it for bytes not yet written. ``None`` for a file already whole.
    """

    json_path: Path
    root: Path
    size: int
    label: str = ""
    growth: Growth | None = None

    def open_json(self) -> JsonFile:
        """The JSON file, opened for reading from its start (``OSError`` as ``open`` raises)."""
        if self.growth is not None:
            return ArrivingFile(self.json_path, self.growth)
        return open(self.json_path, "rb")  # noqa: SIM115 - the caller closes it


def open_export(path: Path) -> ExportSource:
    """Locate the JSON file of a Telegram Desktop export.

    Args:
        path: an export folder holding ``result.json`` (preferred) or ``messages.json``, or the
            JSON file itself (its folder is then the export root).

    Returns:
        The source to pass to ``iter_export``; nothing is parsed yet.

    Raises:
        NotFound: ``path`` does not exist.
        MalformedExport: a folder without either JSON file.
    """
    p = Path(path).expanduser().resolve()
    if p.is_dir():
        for name in EXPORT_FILE_NAMES:
            candidate = p / name
            if candidate.is_file():
                return ExportSource(json_path=candidate, root=p, size=candidate.stat().st_size)
        raise MalformedExport(
            f"{p}: no {' or '.join(EXPORT_FILE_NAMES)} in this folder",
            hint="Point at the folder Telegram Desktop wrote (Export chat history, JSON format).",
            metadata={"file": str(p), "expected": "|".join(EXPORT_FILE_NAMES)},
        )
    if p.is_file():
        return ExportSource(json_path=p, root=p.parent, size=p.stat().st_size)
    raise NotFound(f"{p}: no such file or folder", metadata={"file": str(p)})


def resolve_media(root: Path, rel: str) -> Path | None:
    """The absolute path of a media file named inside an export, or ``None`` when unsafe.

    Args:
        root: the export folder.
        rel: the path as the export wrote it.

    Returns:
        The resolved path (symlinks followed) when it stays inside ``root``; ``None`` for an
        absolute path, a ``..`` component, a NUL, or a path resolving outside ``root``.
        Whether the file exists is not checked.
    """
    root_real = os.path.realpath(root)
    if path_problem(root_real, rel) is not None:
        return None
    return Path(os.path.realpath(os.path.join(root_real, rel)))


def export_slug(path: Path, chat_title: str | None = None) -> str:
    """A stable tag suffix for ``import:<slug>``: lower-case ``a-z``, ``0-9`` and ``-``.

    Args:
        path: the export folder or JSON file; its folder name is the slug's source.
        chat_title: when given, the slug is made from it instead.

    Returns:
        At most ``MAX_SLUG_CHARS`` characters; Cyrillic is transliterated, accents dropped;
        text with no Latin or Cyrillic letters or digits gives ``export-<hash>``.
    """
    if chat_title and chat_title.strip():
        base = chat_title
    else:
        p = Path(path).expanduser().resolve()
        if p.name in EXPORT_FILE_NAMES:
            base = p.parent.name
        elif p.suffix.lower() == ".json":
            base = p.stem
        else:
            base = p.name
    folded = base.lower().translate(_TRANSLIT)
    ascii_only = "".join(
        ch for ch in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(ch)
    )
    slug = _SLUG_JUNK_RE.sub("-", ascii_only).strip("-")[:MAX_SLUG_CHARS].strip("-")
    if slug:
        return slug
    digest = hashlib.sha1(base.encode("utf-8")).hexdigest()[:SLUG_HASH_CHARS]
    return f"export-{digest}"


def path_problem(root_real: str, rel: str) -> str | None:
    """Why ``rel`` may not be opened under ``root_real``, or ``None`` when it is safe."""
    if not rel:
        return "the path is empty"
    if "\x00" in rel:
        return "the path contains a NUL byte"
    windows = PureWindowsPath(rel)
    if PurePosixPath(rel).is_absolute() or windows.drive or windows.root:
        return "the path is absolute"
    if ".." in rel.replace("\\", "/").split("/"):
        return "the path climbs out with '..'"
    real = os.path.realpath(os.path.join(root_real, rel))
    if real != root_real and not real.startswith(root_real + os.sep):
        return "the path resolves outside the export folder"
    return None


def malformed(label: str, where: str, problem: str, offset: int | None = None) -> MalformedExport:
    """The error for ``problem`` at JSON path ``where`` of the file ``label`` names."""
    metadata = {"file": label, "location": where}
    if offset is not None:
        metadata["byte_offset"] = str(offset)
    return MalformedExport(
        f"{label}: {where}: {problem}; expected a Telegram Desktop JSON export "
        "(a chat object with name/type/id/messages, or an account export with chats.list)",
        hint="Re-export from Telegram Desktop in machine-readable JSON format.",
        metadata=metadata,
    )
