"""``normalise`` equals the definition on every string; its fast path changes only the speed."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from chatseek_core.text import (
    folded_for_words,
    normalise,
    normalise_by_definition,
    normalised_words,
    words,
)

_TRICKY = list(
    "абвгдеёжзийклмнЁЙЖ ABCxyz019_-.,!?\t\n\r\x0b\x0c\x1c\x85\u00a0\u2028\u3000"
    "«»—…№ßæøéüİıﬁ²½\u0301\u0306\u0308😀\ufe0f👍🏽ΩΣς한글ㄱ"
)


def test_the_definition_folds_case_marks_compatibility_forms_and_spaces() -> None:
    assert normalise_by_definition("  Ёлка\u00a0и  ЙОГУРТ ") == "елка и иогурт"
    assert normalise_by_definition("Café ﬁle ²") == "cafe file 2"


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet=st.sampled_from(_TRICKY))))
def test_normalise_equals_the_definition(text: str) -> None:
    assert normalise(text) == normalise_by_definition(text)


def test_normalise_equals_the_definition_on_every_canonical_composition() -> None:
    pairs = []
    for cp in range(0x110000):
        decomposition = unicodedata.decomposition(chr(cp)).split()
        if len(decomposition) == 2 and not decomposition[0].startswith("<"):
            pairs.append("".join(chr(int(h, 16)) for h in decomposition))
    assert len(pairs) > 900
    for pair in pairs:
        assert normalise(pair) == normalise_by_definition(pair), ascii(pair)
        assert normalise(f"x{pair}y") == normalise_by_definition(f"x{pair}y"), ascii(pair)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet=st.sampled_from(_TRICKY))))
def test_the_words_of_normalised_text_are_the_words_of_the_text(text: str) -> None:
    assert normalised_words(normalise(text)) == words(text)


def test_text_folded_for_words_keeps_its_whitespace() -> None:
    assert folded_for_words(" Ёлка\tи  ЙОГУРТ\n") == " елка\tи  иогурт\n"
    assert folded_for_words("Plain  ASCII\t") == "plain  ascii\t"
    assert folded_for_words("Café  ﬁle") == "cafe file"  # the definition's path folds it all


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet=st.sampled_from(_TRICKY))))
def test_text_folded_for_words_is_the_normalised_text_but_for_whitespace(text: str) -> None:
    folded = folded_for_words(text)
    assert " ".join(folded.split()) == normalise_by_definition(text)
    assert normalised_words(folded) == normalised_words(normalise_by_definition(text))
