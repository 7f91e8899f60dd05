"""Preset detectors (``preset:<name>``): versioned, bounded checks over candidate messages.

Each detector reads a message's original text (and, where stated, its media kind); patterns are
RE2 (linear time) and at most ``MAX_MATCHES`` pattern hits per message are validated.

    preset         a message matches when
    -------------  ------------------------------------------------------------------------
    password       a password label (password, passwd, pwd, pass, пароль, contraseña, clave)
                   is followed by ``:``, ``=``, ``-`` or "is" and a 4+ character token
    code           a code label (code, otp, pin, 2fa, код, código) is followed within 24
                   characters by a standalone 4-8 digit number (``123 456``, ``123-456`` too)
    api-key        a token has a known key shape (``sk-…``, ``sk_live_``/``pk_live_``/
                   ``rk_live_``, ``AKIA`` + 16, ``ghp_``/``gho_``/``ghs_``/``github_pat_``,
                   ``glpat-``, ``xox[abpr]-``, ``AIza`` + 35, a Telegram bot token
                   ``<8-10 digits>:<35 chars>``), or an api-key label is followed by ``:``/``=``
                   and a 16+ character token
    secret         a PEM ``PRIVATE KEY`` header, a JWT (``eyJ….eyJ….…``), or a secret label
                   (secret, client_secret, token, секрет) followed by ``:``/``=`` and an 8+
                   character token
    card           13-19 digits (single spaces or dashes between groups allowed) starting
                   with 2-6 and passing the Luhn check
    bank           an IBAN (country letters, 2 check digits, 11-30 letters/digits, spaces
                   allowed) whose mod-97 remainder is 1
    passport       a Spanish DNI/NIE with the right control letter, or a passport label
                   (passport, паспорт, pasaporte, reisepass) followed within 16 characters by
                   a document number holding 6+ digits
    phone          ``+`` then 8-15 digits in groups (spaces, dots, dashes, parentheses), or
                   the Russian ``8 (xxx) xxx-xx-xx`` form
    email          ``local@domain.tld``
    telegram-link  a ``t.me/``, ``telegram.me/`` or ``telegram.dog/`` link, or a ``tg://`` URI
    url            an ``http://`` / ``https://`` URL or a ``www.`` address
    contact        a shared contact card, or text with a phone number or an email address
    location       a shared location or venue, or text with decimal coordinates
                   (``40.4168, -3.7038``) or a maps link (Google, Apple, Yandex, OSM)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import re2

__all__ = ["MAX_MATCHES", "PRESET_NAMES", "PRESET_VERSION", "matches"]

PRESET_VERSION = 1
MAX_MATCHES = 64
CARD_DIGITS = (13, 19)
IBAN_MOD = 97
DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"
DNI_LENGTH = 8
PASSPORT_MIN_DIGITS = 6
PHONE_DIGITS = (8, 15)
LATITUDE_MAX = 90.0
LONGITUDE_MAX = 180.0

PRESET_NAMES = (
    "password",
    "code",
    "api-key",
    "secret",
    "card",
    "bank",
    "passport",
    "phone",
    "email",
    "telegram-link",
    "url",
    "contact",
    "location",
)


def _re(pattern: str) -> re2._Regexp:
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options)


_PASSWORD = _re(
    r"(?i)(?:password|passwd|pwd|pass|пароль|contraseña|clave)\s*(?::|=|-|\bis\b)\s*\S{4,}"
)
_CODE = _re(
    r"(?i)(?:code|otp|pin|2fa|код|código)[^\d\n]{0,24}(?:^|[^\d])"
    r"(\d{4,8}|\d{3}[ -]\d{3})(?:[^\d]|$)"
)
_API_KEY = _re(
    r"(?:sk-[A-Za-z0-9_-]{20,}|[spr]k_live_[A-Za-z0-9]{16,}|AKIA[0-9A-Z]{16}"
    r"|gh[pos]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9_-]{20,}"
    r"|xox[abpr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}|\b\d{8,10}:[A-Za-z0-9_-]{35}\b"
    r"|(?i:api[ _-]?key)\s*[:=]\s*[A-Za-z0-9_\-.]{16,})"
)
_SECRET = _re(
    r"(?:-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"|(?i:client_secret|secret|token|секрет)\s*[:=]\s*\S{8,})"
)
_CARD = _re(r"(?:^|[^\d])((?:\d[ -]?){12,18}\d)(?:[^\d]|$)")
_IBAN = _re(r"(?:^|[^A-Za-z0-9])([A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30})(?:[^A-Za-z0-9]|$)")
_DNI = _re(r"(?:^|[^A-Za-z0-9])([XYZxyz]?\d{7,8})[ -]?([A-Za-z])(?:[^A-Za-z0-9]|$)")
_PASSPORT = _re(
    r"(?i)(?:passport|паспорт|pasaporte|reisepass)[^0-9A-Za-z]{0,16}"
    r"(?:(?:no|nr|number|номер|серия)\.?[^0-9A-Za-z]{0,4})?([A-Z0-9][A-Z0-9 ]{4,14}[0-9])"
)
_PHONE = _re(
    r"(?:\+\d[\d ().-]{6,20}\d|(?:^|[^\d])8[ (-]*\d{3}[ )-]*\d{3}[ -]*\d{2}[ -]*\d{2}(?:[^\d]|$))"
)
_EMAIL = _re(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_TELEGRAM = _re(r"(?i)(?:\b(?:t|telegram)\.me/|\btelegram\.dog/|\btg://)\S")
_URL = _re(r"(?i)(?:\bhttps?://[^\s/$.?#][^\s]*|\bwww\.[a-z0-9-]+\.[a-z]{2,})")
_COORDS = _re(r"(?:^|[^\d.])(-?\d{1,2}\.\d{4,})\s*[,;]\s*(-?\d{1,3}\.\d{4,})(?:[^\d.]|$)")
_MAPS = _re(
    r"(?i)\b(?:maps\.google\.[a-z.]+|google\.[a-z.]+/maps|goo\.gl/maps|maps\.app\.goo\.gl"
    r"|maps\.apple\.com|yandex\.[a-z]+/maps|openstreetmap\.org)"
)

_LOCATION_MEDIA = frozenset({"location", "venue"})


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def _iban_ok(candidate: str) -> bool:
    compact = candidate.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    numeric = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(numeric) % IBAN_MOD == 1


def _dni_ok(number: str, letter: str) -> bool:
    prefix = {"X": "0", "Y": "1", "Z": "2"}
    if len(number) != DNI_LENGTH:
        return False
    head = number[0].upper()
    digits = prefix[head] + number[1:] if head in prefix else number
    return DNI_LETTERS[int(digits) % len(DNI_LETTERS)] == letter.upper()


def _any(pattern: re2._Regexp, text: str, check: Callable[[Any], bool] | None = None) -> bool:
    for count, match in enumerate(pattern.finditer(text)):
        if count >= MAX_MATCHES:
            return False
        if check is None or check(match):
            return True
    return False


def _card(match: re2._Match) -> bool:
    digits = "".join(ch for ch in match.group(1) if ch.isdigit())
    low, high = CARD_DIGITS
    return bool(low <= len(digits) <= high and digits[0] in "23456" and _luhn(digits))


def _phone(match: re2._Match) -> bool:
    count = sum(ch.isdigit() for ch in match.group(0))
    low, high = PHONE_DIGITS
    return bool(low <= count <= high)


def _coords(match: re2._Match) -> bool:
    lat, lon = float(match.group(1)), float(match.group(2))
    return abs(lat) <= LATITUDE_MAX and abs(lon) <= LONGITUDE_MAX


def _passport(match: re2._Match) -> bool:
    return bool(sum(ch.isdigit() for ch in match.group(1)) >= PASSPORT_MIN_DIGITS)


def _has_phone(text: str) -> bool:
    return _any(_PHONE, text, _phone)


def _has_email(text: str) -> bool:
    return _any(_EMAIL, text)


def matches(name: str, text: str, media_kind: str | None) -> bool:
    """Whether the message with ``text`` (and media of ``media_kind``) matches preset ``name``.

    Raises:
        KeyError: ``name`` is not one of ``PRESET_NAMES`` (validation rejects it earlier).
    """
    if name == "password":
        return _any(_PASSWORD, text)
    if name == "code":
        return _any(_CODE, text)
    if name == "api-key":
        return _any(_API_KEY, text)
    if name == "secret":
        return _any(_SECRET, text)
    if name == "card":
        return _any(_CARD, text, _card)
    if name == "bank":
        return _any(_IBAN, text, lambda m: _iban_ok(m.group(1)))
    if name == "passport":
        return _any(_DNI, text, lambda m: _dni_ok(m.group(1), m.group(2))) or _any(
            _PASSPORT, text, _passport
        )
    if name == "phone":
        return _has_phone(text)
    if name == "email":
        return _has_email(text)
    if name == "telegram-link":
        return _any(_TELEGRAM, text)
    if name == "url":
        return _any(_URL, text)
    if name == "contact":
        return media_kind == "contact" or _has_phone(text) or _has_email(text)
    if name == "location":
        return media_kind in _LOCATION_MEDIA or _any(_COORDS, text, _coords) or _any(_MAPS, text)
    raise KeyError(name)
