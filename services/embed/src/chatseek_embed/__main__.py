"""``python -m chatseek_embed``: serve the embed service."""

from chatseek_core.runner import main_for
from chatseek_embed.server import start

main = main_for("embed", start)

if __name__ == "__main__":
    main()
