"""Text normalisation and the word analyser shared by indexing, querying and the fake models.

Invariants:
* ``normalise`` is the one definition of "normalised text" (NFKD, combining marks removed,
  NFC, lower-case, whitespace folded); ``NORMALISER_VERSION`` changes whenever it does.
* ``words`` splits the way FTS5's ``unicode61`` tokenizer does (letters, digits and marks of
  every script are token characters; everything else separates), so a term produced here is a
  term the index holds.
* ``stem`` picks a Snowball stemmer per token by script: Cyrillic → Russian (ё folds to е),
  Latin → English, anything else is kept as typed. Nothing is ever dropped.
"""

from __future__ import annotations

import functools
import re
import unicodedata

import Stemmer

__all__ = [
    "NORMALISER_VERSION",
    "analyse",
    "normalise",
    "redact_digest",
    "stem",
    "stems",
    "words",
]

NORMALISER_VERSION = 1
_WORD_RE = re.compile(r"[^\W_]+", re.UNICODE)
_SPACE_RE = re.compile(r"\s+", re.UNICODE)
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")
_LATIN = re.compile(r"[a-z]")
_STEM_CACHE_SIZE = 200_000

_russian = Stemmer.Stemmer("russian")
_english = Stemmer.Stemmer("english")


def normalise(text: str) -> str:
    """Fold ``text`` for matching: NFKD, marks removed, NFC, lower-case, whitespace folded."""
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    folded = unicodedata.normalize("NFC", stripped).lower()
    return _SPACE_RE.sub(" ", folded).strip()


def words(text: str) -> list[str]:
    """The normalised word tokens of ``text``, in order (``unicode61``-compatible)."""
    return _WORD_RE.findall(normalise(text))


@functools.lru_cache(maxsize=_STEM_CACHE_SIZE)
def stem(token: str) -> str:
    """The Snowball stem of one normalised token, chosen by its script; other scripts as typed.

    Marks are already removed by ``normalise``, so ``ё`` has become ``е`` before this runs.
    Tokens that mix digits and letters (``2fa``, ``v2``) are kept whole: stemming them only
    breaks exact identifiers.
    """
    if any(ch.isdigit() for ch in token):
        return token
    if _CYRILLIC.search(token):
        return str(_russian.stemWord(token))
    if _LATIN.search(token):
        return str(_english.stemWord(token))
    return token


def stems(text: str) -> list[str]:
    """The stems of every word of ``text``, in order."""
    return [stem(w) for w in words(text)]


def analyse(text: str) -> str:
    """The stemmed form of ``text`` as one space-joined string, for a stemmed FTS column."""
    return " ".join(stems(text))


def redact_digest(text: str) -> str:
    """``<N chars #digest>``: how message text appears in logs above DEBUG."""
    import hashlib

    digest = hashlib.blake2s(text.encode("utf-8"), digest_size=4).hexdigest()
    return f"<{len(text)} chars #{digest}>"
