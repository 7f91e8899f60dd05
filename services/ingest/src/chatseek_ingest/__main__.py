"""``python -m chatseek_ingest``: serve the ingest service."""

from chatseek_core.runner import main_for
from chatseek_ingest.server import start

main = main_for("ingest", start)

if __name__ == "__main__":
    main()
