from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from chatseek_core.errors import ModelNotFound, ModelUnavailable
from chatseek_embed.registry import (
    DEFAULT_EMBED_MODEL,
    DEFAULT_RERANK_MODEL,
    PACKAGED_MINILM,
    canonical_name,
    download,
    get_spec,
    identity_for_directory,
    list_models,
    packaged_minilm_path,
    resolve_model,
    role_prompts,
    verify,
)

E5_REVISION = "614241f622f53c4eeff9890bdc4f31cfecc418b3"
HUB_E5 = "intfloat/multilingual-e5-small"


def _linked_copy(source: Path, target: Path, *, real: tuple[str, ...] = ()) -> Path:
    """A copy of a model directory whose files are symlinks, except ``real`` ones (copied)."""
    for path in source.rglob("*"):
        if not path.is_file():
            continue
        rel = path.relative_to(source)
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if rel.as_posix() in real:
            shutil.copyfile(path, dest)
        else:
            dest.symlink_to(path)
    return target


def _fake_hf_cache(cache: Path, repo: str, revision: str, files: dict[str, bytes]) -> Path:
    org, name = repo.split("/")
    root = cache / f"models--{org}--{name}"
    snapshot = root / "snapshots" / revision
    for rel, content in files.items():
        (snapshot / rel).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / rel).write_bytes(content)
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(revision)
    return snapshot


def test_the_registry_pins_every_hub_model_to_a_commit() -> None:
    names = [spec.name for spec in list_models()]
    assert {
        DEFAULT_EMBED_MODEL,
        HUB_E5,
        DEFAULT_RERANK_MODEL,
        "BAAI/bge-m3",
        PACKAGED_MINILM,
    } <= set(names)
    for spec in list_models():
        if spec.source == "hub":
            assert re.fullmatch(r"[0-9a-f]{40}", spec.revision), spec.name
    assert get_spec(DEFAULT_EMBED_MODEL).dim == 384  # type: ignore[union-attr]
    assert get_spec(HUB_E5).dim == 384  # type: ignore[union-attr]
    assert get_spec("BAAI/bge-m3").dim == 1024  # type: ignore[union-attr]


def test_the_packaged_model_verifies_fully_pinned() -> None:
    report = verify(PACKAGED_MINILM)
    assert report.ok and report.fully_pinned
    assert report.directory == packaged_minilm_path()
    assert report.identity == get_spec(PACKAGED_MINILM).revision  # type: ignore[union-attr]
    assert {f.status for f in report.files} == {"ok"}


def test_the_packaged_directory_is_recognised_by_location() -> None:
    assert canonical_name(packaged_minilm_path()) == PACKAGED_MINILM
    assert verify(packaged_minilm_path()).fully_pinned


def test_a_tampered_copy_fails_verification(tmp_path: Path) -> None:
    copy = _linked_copy(packaged_minilm_path(), tmp_path / "minilm", real=("config.json",))
    config = copy / "config.json"
    config.write_text(config.read_text().replace('"hidden_act": "gelu"', '"hidden_act": "relu"'))
    (copy / "vocab.txt").unlink()
    report = verify(copy, against=PACKAGED_MINILM)
    assert not report.ok
    verdicts = {f.path: f.status for f in report.problems}
    assert verdicts == {"config.json": "mismatch", "vocab.txt": "missing"}


def test_an_untampered_copy_verifies_against_its_name(tmp_path: Path) -> None:
    copy = _linked_copy(packaged_minilm_path(), tmp_path / "minilm")
    assert verify(copy, against=PACKAGED_MINILM).fully_pinned


def test_an_unknown_directory_is_reported_unpinned_file_by_file(tmp_path: Path) -> None:
    copy = _linked_copy(packaged_minilm_path(), tmp_path / "some-model")
    report = verify(copy)
    assert report.ok and not report.fully_pinned
    assert {f.status for f in report.files} == {"unpinned"}
    assert report.revision == report.identity


def test_directory_identity_is_stable_across_locations_and_follows_content(tmp_path: Path) -> None:
    original = identity_for_directory(packaged_minilm_path())
    copy = _linked_copy(
        packaged_minilm_path(), tmp_path / "elsewhere", real=("README.md", "modules.json")
    )
    assert identity_for_directory(copy) == original
    (copy / "README.md").write_text("edited docs do not change what the model is")
    assert identity_for_directory(copy) == original
    (copy / "modules.json").write_text("[]")
    assert identity_for_directory(copy) != original


def test_identity_of_an_empty_directory_is_model_not_found(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFound):
        identity_for_directory(tmp_path)


def test_a_hub_model_that_is_not_downloaded_is_model_not_found_with_a_hint(
    tmp_path: Path,
) -> None:
    with pytest.raises(ModelNotFound) as caught:
        resolve_model(HUB_E5, cache_dir=tmp_path)
    assert caught.value.reason == "MODEL_NOT_FOUND"
    assert caught.value.hint == f"chatseek models download {HUB_E5}"
    with pytest.raises(ModelNotFound):
        verify(HUB_E5, tmp_path)


def test_a_cached_hub_model_resolves_at_its_pinned_commit_and_reports_unpinned_files(
    tmp_path: Path,
) -> None:
    snapshot = _fake_hf_cache(
        tmp_path,
        HUB_E5,
        E5_REVISION,
        {"config.json": b"{}", "tokenizer.json": b"{}", "tokenizer_config.json": b"{}"},
    )
    resolved = resolve_model(HUB_E5, cache_dir=tmp_path)
    assert resolved.directory == snapshot
    assert resolved.revision == E5_REVISION
    incomplete = verify(HUB_E5, tmp_path)
    assert [f.path for f in incomplete.problems] == ["model.safetensors"]
    (snapshot / "model.safetensors").write_bytes(b"weights")
    complete = verify(HUB_E5, tmp_path)
    assert complete.ok and not complete.fully_pinned
    assert complete.revision == E5_REVISION
    statuses = {f.path: f.status for f in complete.files}
    assert statuses["model.safetensors"] == "unpinned"
    assert statuses["modules.json"] == "absent"


def test_a_snapshot_directory_resolves_to_its_hub_name_and_commit(tmp_path: Path) -> None:
    snapshot = _fake_hf_cache(tmp_path, "someone/tiny-model", "c0ffee", {"config.json": b"{}"})
    assert canonical_name(snapshot) == "someone/tiny-model"
    resolved = resolve_model(str(snapshot))
    assert (resolved.name, resolved.revision) == ("someone/tiny-model", "c0ffee")


def test_a_missing_directory_path_is_model_not_found(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFound):
        resolve_model(str(tmp_path / "nope"))


def test_download_refuses_an_unknown_model_and_lists_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFound) as caught:
        download("someone/unknown-model", tmp_path)
    assert DEFAULT_EMBED_MODEL in caught.value.candidates


def test_download_while_offline_is_model_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailable) as caught:
        download(HUB_E5, tmp_path)
    assert caught.value.reason == "MODEL_UNAVAILABLE"
    assert not any(tmp_path.iterdir())


def test_download_of_the_packaged_model_verifies_it_in_place(tmp_path: Path) -> None:
    report = download(PACKAGED_MINILM, tmp_path)
    assert report.fully_pinned
    assert not any(tmp_path.iterdir())


def test_role_prompts_follow_the_model_family() -> None:
    assert role_prompts(HUB_E5) == {"query": "query: ", "passage": "passage: "}
    assert role_prompts("/models/multilingual-e5-base") == {
        "query": "query: ",
        "passage": "passage: ",
    }
    snapshot = f"/data/models--intfloat--multilingual-e5-small/snapshots/{E5_REVISION}"
    assert role_prompts(snapshot) == {"query": "query: ", "passage": "passage: "}
    assert role_prompts("BAAI/bge-m3") == {"query": "", "passage": ""}
    assert role_prompts(PACKAGED_MINILM) == {"query": "", "passage": ""}
