"""Russian and English function words, for ranked (free-text) queries only.

A question such as "how do I open a bank account" must not fill a BM25 list with every unit
that says "how" or "I". Ranked lists leave these words out of their match whenever the query
has any other word; a query made only of them ("the who") keeps them all. The word indexes
still hold every word, so the strict language finds any of them exactly.

The lists hold the words as written; they are compared after ``text.words`` normalisation
(lower case, marks removed, ``й``/``ё`` folded), so ``её`` and ``ее`` are one entry. Apostrophe
forms split at the apostrophe (``don't`` → ``don``, ``t``), so their pieces are listed too.
"""

from __future__ import annotations

from chatseek_core.text import stem, words

__all__ = ["MAX_QUERY_TERMS", "STOP_WORDS", "content_words", "is_stop_word", "query_terms"]

MAX_QUERY_TERMS = 64

_ENGLISH = """
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not now of off on once only or other our ours ourselves out
over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves
s t d ll m re ve don doesn didn isn aren wasn weren hasn haven hadn won wouldn shouldn couldn
can't cannot let also anyone anybody someone something anything there's i'm i've i'd it's
"""

_RUSSIAN = """
а без более бы был была были было быть в вам вас весь во вот все всего всех вы где да даже
для до его ее если есть еще же за здесь и из или им их к как какая какие какой когда кого
кто ли либо мне много может можно мой моя мы на над надо наш не него нее нет ни них но ну о
об однако он она они оно от очень по под при про с со так также такой там те тем то того
тоже той только том ты у уж уже хотя чего чей чем что чтобы чье чья эта эти это этого этой
этом этот я себе себя свой своя свои сам сама сами разве вдруг ведь впрочем всегда иногда
тогда потом теперь тут кто-то что-то какой-то ой ах эх вообще просто типа вроде
"""

STOP_WORDS: frozenset[str] = frozenset(words(_ENGLISH) + words(_RUSSIAN))


def is_stop_word(word: str) -> bool:
    """Whether a normalised word (as ``text.words`` yields it) is a function word."""
    return word in STOP_WORDS


def content_words(tokens: list[str]) -> list[str]:
    """``tokens`` without the function words, or all of them when nothing else is left."""
    kept = [w for w in tokens if w not in STOP_WORDS]
    return kept or list(tokens)


def query_terms(query_text: str) -> list[tuple[str, str]]:
    """The ``(raw, stem)`` pairs of a ranked query's words, first occurrence order, no repeats.

    Function words are left out unless the query has nothing else. At most
    ``MAX_QUERY_TERMS`` pairs are kept; an empty list means nothing indexable. Lexical's BM25
    lists match these terms, and fusion scores a hit's messages by them.
    """
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for word in content_words(words(query_text)):
        if word in seen:
            continue
        seen.add(word)
        out.append((word, stem(word)))
        if len(out) == MAX_QUERY_TERMS:
            break
    return out
