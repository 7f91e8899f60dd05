"""The config file's [search] table: defaults, the fusion rule, and bad values named."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatseek_core.config import FUSION_RULES, SearchConfig, load
from chatseek_core.errors import InvalidArgument


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_a_missing_file_means_every_default(tmp_path: Path) -> None:
    search = load(tmp_path / "absent.toml").search
    assert search == SearchConfig()
    assert search.fusion == "convex"
    assert (search.words_weight, search.meaning_weight, search.messages_weight) == (0.6, 0.4, 0.0)


@pytest.mark.parametrize("rule", FUSION_RULES)
def test_each_fusion_rule_can_be_chosen(tmp_path: Path, rule: str) -> None:
    path = _write(tmp_path, f'[search]\nfusion = "{rule}"\nmeaning_weight = 0.6\n')
    search = load(path).search
    assert (search.fusion, search.meaning_weight) == (rule, 0.6)


def test_an_unknown_fusion_rule_is_named_with_the_choices(tmp_path: Path) -> None:
    path = _write(tmp_path, '[search]\nfusion = "magic"\n')
    with pytest.raises(InvalidArgument) as caught:
        load(path)
    assert "fusion" in caught.value.message and str(path) in caught.value.message
    assert caught.value.candidates == list(FUSION_RULES)


@pytest.mark.parametrize(
    ("line", "key"),
    [('rrf_k = "sixty"', "rrf_k"), ("rerank = 1", "rerank"), ("colour = 3", "colour")],
)
def test_bad_keys_and_values_are_refused_by_name(tmp_path: Path, line: str, key: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        load(_write(tmp_path, f"[search]\n{line}\n"))
    assert key in caught.value.message
