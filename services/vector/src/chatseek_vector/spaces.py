"""Embedding spaces: which model made the stored vectors, and the vec0 tables that hold them.

Invariants:
* Exactly one space is current. Its identity (model name, revision, dimension, normalisation)
  is compared with the embedder's before every write and every query; vectors of different
  spaces are never compared.
* A space's vectors live in ``vec_<space_id>`` (float, cosine, partitioned by chat, with start
  date, kind and account as metadata) and ``vbit_<space_id>`` (the sign bits, for the quantised
  first pass), both keyed by unitize's ``unit_id``.
* A model change refuses dense work with ``EmbeddingSpaceMismatch`` until a re-embed makes the
  new model's space current; so does a change of what the embedder reads of a unit
  (``PASSAGE_FORM``, part of the space's revision).
"""

from __future__ import annotations

from dataclasses import dataclass

from chatseek_core.db import Connection
from chatseek_core.errors import EmbeddingSpaceMismatch
from chatseek_core.render import indexed_text

__all__ = [
    "Identity",
    "PASSAGE_FORM",
    "Space",
    "bit_table",
    "create_space",
    "current_space",
    "drop_space",
    "float_table",
    "passage_text",
    "require_current",
    "space_revision",
]

PASSAGE_FORM = "unstamped"
"""What the embedder reads of a unit (``passage_text``), named in the revision of every space
whose vectors it made: vectors of texts given another way are never compared with them."""


@dataclass(frozen=True)
class Identity:
    """What the embedder says it is."""

    model: str
    revision: str
    dim: int
    normalized: bool


@dataclass(frozen=True)
class Space:
    """A stored embedding space."""

    space_id: int
    identity: Identity


def passage_text(text: str) -> str:
    """What the embedder reads of a unit's rendered ``text``: its lines without their time
    stamps, then its dates once as words (``render.indexed_text``, as the word indexes read it).

    A ``[YYYY-MM-DD HH:MM]`` stamp on every line was a fifth of a unit's tokens, and an
    embedder's time follows its tokens; the worded dates still carry the when.
    """
    return indexed_text(text)


def space_revision(model_revision: str) -> str:
    """The revision of the space an embedder of ``model_revision`` fills: the model's own and
    ``PASSAGE_FORM``."""
    return f"{model_revision}+{PASSAGE_FORM}"


def float_table(space_id: int) -> str:
    """The vec0 table of float vectors of a space."""
    return f"vec_{int(space_id)}"


def bit_table(space_id: int) -> str:
    """The vec0 table of binary-quantised vectors of a space."""
    return f"vbit_{int(space_id)}"


def current_space(conn: Connection) -> Space | None:
    """The current space, or None before anything was embedded."""
    row = conn.execute(
        "SELECT space_id, model, revision, dim, normalized FROM spaces WHERE current = 1"
    ).fetchone()
    if row is None:
        return None
    return Space(int(row[0]), Identity(row[1], row[2], int(row[3]), bool(row[4])))


def create_space(conn: Connection, identity: Identity) -> Space:
    """Create (or reuse) the space of ``identity``, make it current and create its tables.

    Call inside a transaction. Older spaces stay until ``drop_space``.
    """
    conn.execute("UPDATE spaces SET current = 0")
    conn.execute(
        "INSERT INTO spaces (model, revision, dim, normalized, current) VALUES (?, ?, ?, ?, 1)"
        " ON CONFLICT (model, revision, dim) DO UPDATE SET current = 1",
        (identity.model, identity.revision, identity.dim, int(identity.normalized)),
    )
    row = conn.execute(
        "SELECT space_id FROM spaces WHERE model = ? AND revision = ? AND dim = ?",
        (identity.model, identity.revision, identity.dim),
    ).fetchone()
    space = Space(int(row[0]), identity)
    dim = int(identity.dim)
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {float_table(space.space_id)} USING vec0("
        " unit_id INTEGER PRIMARY KEY, chat_id INTEGER PARTITION KEY,"
        f" embedding float[{dim}] distance_metric=cosine,"
        " start_date INTEGER, kind TEXT, account TEXT)"
    )
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {bit_table(space.space_id)} USING vec0("
        " unit_id INTEGER PRIMARY KEY, chat_id INTEGER PARTITION KEY,"
        f" embedding bit[{dim}], start_date INTEGER, kind TEXT, account TEXT)"
    )
    return space


def drop_space(conn: Connection, space_id: int) -> None:
    """Delete a space, its tables, its cache and its bookkeeping. Call inside a transaction."""
    conn.execute(f"DROP TABLE IF EXISTS {float_table(space_id)}")
    conn.execute(f"DROP TABLE IF EXISTS {bit_table(space_id)}")
    conn.execute("DELETE FROM embedded_units WHERE space_id = ?", (space_id,))
    conn.execute("DELETE FROM vector_cache WHERE space_id = ?", (space_id,))
    conn.execute("DELETE FROM spaces WHERE space_id = ?", (space_id,))


def require_current(conn: Connection, identity: Identity) -> Space:
    """The current space when it matches ``identity``.

    Raises:
        EmbeddingSpaceMismatch: vectors were made by another model, dimension or revision (a
            model file, or ``PASSAGE_FORM``), or none exist yet and the caller needs them (the
            hint says how to rebuild).
    """
    space = current_space(conn)
    if space is None:
        raise EmbeddingSpaceMismatch(
            "no vectors have been stored yet",
            hint="run `chatseek embed` to embed the archive",
            metadata={"model": identity.model},
        )
    stored = space.identity
    if stored != identity:
        model_revision = identity.revision.removesuffix(f"+{PASSAGE_FORM}")
        if (stored.model, stored.dim) != (identity.model, identity.dim):
            what = (
                f"{stored.model} ({stored.dim}-d), the embedder is {identity.model}"
                f" ({identity.dim}-d)"
            )
        elif stored.revision.partition("+")[0] == model_revision:
            # The same model file; an older chatseek gave it the units another way.
            what = (
                f"{stored.model} reading units as an older chatseek gave them; this one gives"
                f" them {PASSAGE_FORM} (each line without its time stamp)"
            )
        else:
            what = (
                f"revision {stored.revision} of {stored.model}, the embedder is {identity.revision}"
            )
        raise EmbeddingSpaceMismatch(
            f"stored vectors come from {what}",
            hint="run `chatseek embed --reembed` to rebuild the vectors with the embedder",
            metadata={"stored": stored.model, "embedder": identity.model},
        )
    return space
