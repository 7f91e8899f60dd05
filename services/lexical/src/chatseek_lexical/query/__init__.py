"""The strict Lucene message search: parse, validate, compile to SQL, execute under budgets.

Entry points: ``parse`` (text → typed tree), ``tree_to_json`` / ``tree_from_json`` and
``validate`` (the MCP tree form), ``search`` (→ ``Envelope``), ``stats`` (→ ``StatsResult``)
and ``deep_link``. The language is described in DESIGN.md section 5; the field registry lives in
``fields``, the detectors in ``presets``, the budgets in ``limits``.
"""

from __future__ import annotations

from chatseek_lexical.query.ast import LANGUAGE, TREE_VERSION, Tree, to_sexpr
from chatseek_lexical.query.envelope import Envelope, StatsResult
from chatseek_lexical.query.execute import SearchRequest, search
from chatseek_lexical.query.fields import FIELDS, FIELDS_VERSION
from chatseek_lexical.query.limits import DEFAULT_BUDGETS, Budgets
from chatseek_lexical.query.links import deep_link, locator
from chatseek_lexical.query.parser import parse
from chatseek_lexical.query.presets import PRESET_NAMES, PRESET_VERSION
from chatseek_lexical.query.stats import stats
from chatseek_lexical.query.tree_json import tree_from_json, tree_to_json
from chatseek_lexical.query.validate import validate

__all__ = [
    "DEFAULT_BUDGETS",
    "FIELDS",
    "FIELDS_VERSION",
    "LANGUAGE",
    "PRESET_NAMES",
    "PRESET_VERSION",
    "TREE_VERSION",
    "Budgets",
    "Envelope",
    "SearchRequest",
    "StatsResult",
    "Tree",
    "deep_link",
    "locator",
    "parse",
    "search",
    "stats",
    "to_sexpr",
    "tree_from_json",
    "tree_to_json",
    "validate",
]
