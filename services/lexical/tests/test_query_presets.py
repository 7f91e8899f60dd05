"""Preset detectors: each one on texts that must and must not match."""

from __future__ import annotations

import pytest

from chatseek_lexical.query.presets import PRESET_NAMES, matches

CASES: list[tuple[str, list[str], list[str]]] = [
    (
        "password",
        ["password: hunter22", "Пароль - qwerty123", "the pwd is s3cr3t!", "clave=abcd1234"],
        ["I forgot my password", "passport: X1234567", "pass the salt"],
    ),
    (
        "code",
        ["Your code: 482913", "код подтверждения 1234", "OTP 123-456", "2FA code is 889900"],
        ["code review tomorrow", "postal code 28001234567", "code 12"],
    ),
    (
        "api-key",
        [
            "sk-abcdefghijklmnopqrstuvwx1234",
            "AKIAABCDEFGHIJKLMNOP",
            "ghp_" + "a" * 36,
            "xoxb-1234567890-abcdef",
            "AIza" + "B" * 35,
            "bot 123456789:" + "A" * 35,
            "api key: 0123456789abcdef0123",
        ],
        ["the api is down", "sk-short", "AKIA123"],
    ),
    (
        "secret",
        [
            "-----BEGIN RSA PRIVATE KEY-----",
            "-----BEGIN PRIVATE KEY-----",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijk",
            "client_secret=abcdef123456",
            "token: 9f8e7d6c5b4a",
        ],
        ["it is a secret", "token ring"],
    ),
    (
        "card",
        ["4111 1111 1111 1111", "card 5500-0000-0000-0004", "4012888888881881"],
        ["4111 1111 1111 1112", "1234 5678 9012 3456", "order 12345678", "9111111111111111"],
    ),
    (
        "bank",
        ["IBAN ES91 2100 0418 4502 0005 1332", "GB82WEST12345698765432", "DE89370400440532013000"],
        ["ES91 2100 0418 4502 0005 1333", "GB00WEST12345698765432", "AB12"],
    ),
    (
        "passport",
        ["My DNI is 12345678Z", "NIE X1234567L", "паспорт 45 06 123456", "passport no. 533380006"],
        ["DNI 12345678A", "my passport expired", "id 1234"],
    ),
    (
        "phone",
        ["+34 612 345 678", "call +1 (415) 555-2671", "8 (912) 345-67-89", "+7 912 345 67 89"],
        ["+12", "room 612 345", "1234-5678"],
    ),
    ("email", ["mail ivan@example.com", "a.b+c@mail.co.uk"], ["ivan at example", "@ivan", "x@y"]),
    (
        "telegram-link",
        [
            "https://t.me/expats_madrid/1",
            "join t.me/+AbCdEf",
            "tg://resolve?domain=x",
            "telegram.me/chan",
        ],
        ["telegram is an app", "t.me"],
    ),
    (
        "url",
        ["see https://example.org/x", "http://a.b", "www.example.org"],
        ["example dot org", "https://"],
    ),
    (
        "location",
        [
            "40.4168, -3.7038",
            "https://maps.google.com/?q=1",
            "maps.app.goo.gl/abc",
            "yandex.ru/maps/213",
        ],
        ["version 1.2345, 2.5", "99.12345, 200.12345", "go left"],
    ),
    ("contact", ["call +34 612 345 678", "ivan@example.com"], ["call me maybe"]),
]


@pytest.mark.parametrize(("name", "positives", "negatives"), CASES)
def test_preset_matches_its_examples_and_only_them(
    name: str, positives: list[str], negatives: list[str]
) -> None:
    for text in positives:
        assert matches(name, text, None), (name, text)
    for text in negatives:
        assert not matches(name, text, None), (name, text)


def test_every_preset_has_examples() -> None:
    assert {name for name, _, _ in CASES} == set(PRESET_NAMES)


def test_shared_contact_and_location_media_match_their_presets() -> None:
    assert matches("contact", "", "contact")
    assert matches("location", "", "location")
    assert matches("location", "", "venue")
    assert not matches("location", "", "photo")


def test_a_flood_of_candidate_numbers_is_bounded() -> None:
    text = " ".join(["4111 1111 1111 1112"] * 200 + ["4111 1111 1111 1111"])
    assert not matches("card", text, None)


def test_unknown_preset_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        matches("ssn", "x", None)
