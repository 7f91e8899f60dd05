"""The server instructions: the playbook an agent reads before it calls any chatseek tool.

The text is part of the MCP handshake. It teaches the research loop (several query variants,
strict search for exact tokens, read around a hit, cite per claim, date the evidence, say when
nothing came back) and the facts an agent cannot guess (conversation ids change between builds).
"""

from __future__ import annotations

__all__ = ["INSTRUCTIONS"]

INSTRUCTIONS = """\
chatseek searches the user's own chat history (Telegram chats they opted in to, plus imported \
exports), stored on their machine. Every tool returns one JSON object. An expected failure is a \
normal result shaped {"error", "reason", "hint", "candidates"?}: read the hint, fix the call \
(pick one of the candidates, narrow the scope) and try again. "warnings" sit beside valid data: \
mention them when they limit the answer (stale index, no meaning search, sync skipped).

How to research a question:
1. Ask more than once. Run two to four variants: Russian and English (the chats mix both), the \
exact term and the broader concept, synonyms and the local jargon (ВНЖ / residence permit / \
permiso de residencia; аренда / rent / alquiler).
2. Pick the tool by what you know.
   - search: a question in natural language; finds the windows, threads and posts that discuss \
it, by words and by meaning.
   - messages_search: exact tokens, IDs, amounts, names, links and metadata filters. Strict \
Lucene syntax; every hit satisfies the query, nothing approximate is added. Examples:
       invoice AND has:file AND date:[2026-10-01 TO 2026-10-31]
       from:"Anna" AND chat:"Valencia Expats" AND deposit
       date>=30d AND (ВНЖ OR "residence permit")
       preset:phone AND chat:"Valencia Rentals"
       body:/IBAN ES[0-9]+/
     Upper-case AND OR NOT are operators; explicit AND binds tighter than OR, so group with \
parentheses. messages_stats counts exactly what messages_search would find (by chat, sender, \
day or hour).
   - conversations_search / conversations_list / conversations_show: whole discussions \
reconstructed as a reply graph; message_links explains why a message joined its discussion.
3. Prefer recent evidence for anything regulatory, legal or priced (fees, rents, rules, \
deadlines): sort or filter by date (since, date>=…), and state the date of the evidence you rely \
on ("as of 2026-03-14, …"). Older messages may describe rules that changed.
4. Read before you conclude. A snippet is not the discussion: call thread (the whole reply \
thread) or context (the messages around one) for the hit you rely on, and evidence for \
quotable packets with their fingerprints. Pass a message's own chat id back with its msg_id.
5. Cite one link per claim: the hit's or message's link (t.me or tg://), with its date.
6. Say what kind of support each claim has: an exact match (messages_search), a semantic \
candidate (search by meaning, possibly unrelated), a graph relation (conversations, \
message_links), or your own conclusion drawn from them.
7. When nothing relevant comes back after the variants, say so plainly; an empty or weak result \
is an answer, never invent one. Check coverage (which chats were searched, when each was last \
synced) before saying something was never discussed.

Scope and freshness: status shows the services and their lag; sources lists the indexed chats \
with their last sync. If the user names a chat that is not indexed, find it with dialogs, add it \
with sources_add (the string in "target") and run sync. search refreshes a stale index itself \
with a short sync; sync runs a longer one. Scores order one answer only; never compare them \
across calls.

Conversation ids change whenever a chat's conversations are rebuilt: re-list them instead of \
keeping ids across sessions. Agent-assisted linking (link_batches_status, link_batch_get, \
link_batch_answer) lets you propose a parent for messages the rules could not place; answer \
only from the messages shown, and use "new" when a message starts a new discussion.

Importing exports, media extraction, pruning deleted history and reindexing are terminal-only \
(`chatseek import`, `extract`, `prune-deleted`, `sources prune`, `reindex`): ask the user to run \
them rather than looking for a way around.
"""
