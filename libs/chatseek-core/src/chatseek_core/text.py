"""Text normalisation and the word analyser shared by indexing, querying and the fake models.

Invariants:
* ``normalise_by_definition`` is the one definition of "normalised text" (NFKD, combining
  marks removed, NFC, lower-case, whitespace folded); ``NORMALISER_VERSION`` changes whenever
  it does. ``normalise`` returns the same for every string (property tests pin it), taking a
  fast path for text whose characters need no decomposition (ASCII, Latin-1, Cyrillic,
  punctuation, symbols, emoji): most chat text, normalised on every import and query.
* ``words`` decides every token, for the index and for queries alike: letters and digits of
  every script are token characters, everything else separates. The word index stores these
  tokens space-joined and FTS5 only splits them at the spaces, so a term produced here is a term
  the index holds.
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
    "folded_for_words",
    "normalise",
    "normalise_by_definition",
    "normalised_words",
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
# Entries, about 200 bytes each: at most about 13 MiB. The word indexer keeps its own, byte-bounded.
_STEM_CACHE_SIZE = 65_536

_russian = Stemmer.Stemmer("russian")
_english = Stemmer.Stemmer("english")


def normalise_by_definition(text: str) -> str:
    """Fold ``text`` for matching: NFKD, marks removed, NFC, lower-case, whitespace folded."""
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    folded = unicodedata.normalize("NFC", stripped).lower()
    return _SPACE_RE.sub(" ", folded).strip()


# Blocks whose self-decomposing characters take the fast path: ASCII, Latin-1, Cyrillic,
# punctuation, currency, arrows and symbols, dingbats, variation selectors, emoji.
_FAST_BLOCKS = (
    (0x0000, 0x00FF),
    (0x0400, 0x04FF),
    (0x2000, 0x206F),
    (0x20A0, 0x20CF),
    (0x2190, 0x27BF),
    (0x2B00, 0x2BFF),
    (0xFE00, 0xFE0F),
    (0x1F000, 0x1FAFF),
)
# The only Cyrillic letters that decompose; per character these equal NFKD-and-strip-marks.
_CYRILLIC_FOLDS = (("й", "и"), ("Й", "И"), ("ё", "е"), ("Ё", "Е"))


def _safe_class() -> re.Pattern[str]:
    """A regex matching strings that normalisation leaves alone apart from case and spaces.

    Holds characters of ``_FAST_BLOCKS`` that are their own NFKD form and not combining; none
    of them composes with a neighbour under NFC (a test pins that).
    """
    safe = [
        cp
        for first, last in _FAST_BLOCKS
        for cp in range(first, last + 1)
        if not unicodedata.combining(chr(cp)) and unicodedata.normalize("NFKD", chr(cp)) == chr(cp)
    ]
    spans: list[tuple[int, int]] = []
    for cp in safe:
        if spans and spans[-1][1] == cp - 1:
            spans[-1] = (spans[-1][0], cp)
        else:
            spans.append((cp, cp))
    body = "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in spans
    )
    return re.compile(f"[{body}]*")


_SAFE_RE = _safe_class()


def normalise(text: str) -> str:
    """``normalise_by_definition(text)``, several times faster on most chat text."""
    # split() folds as \s+ does; folded_for_words leaves runs of whitespace as they are.
    return " ".join(folded_for_words(text).split())


def folded_for_words(text: str) -> str:
    """``normalise(text)`` but for its whitespace, which may stay unfolded: it holds the same
    words (``normalised_words``), and is cheaper where only the words are read."""
    if text.isascii():
        return text.lower()
    for accented, plain in _CYRILLIC_FOLDS:
        if accented in text:
            text = text.replace(accented, plain)
    if _SAFE_RE.fullmatch(text) is None:
        return normalise_by_definition(text)
    # NFKD, mark removal and NFC are the identity on safe text.
    return text.lower()


def words(text: str) -> list[str]:
    """The normalised word tokens of ``text``, in order: the tokens the word index holds."""
    return _WORD_RE.findall(folded_for_words(text))


def normalised_words(norm: str) -> list[str]:
    """``words(text)`` given ``norm = normalise(text)`` (or ``folded_for_words(text)``): for
    callers that need both."""
    return _WORD_RE.findall(norm)


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
