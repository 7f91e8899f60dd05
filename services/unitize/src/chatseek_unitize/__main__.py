"""``python -m chatseek_unitize``: serve the unitize service."""

from chatseek_core.runner import main_for
from chatseek_unitize.server import start

main = main_for("unitize", start)

if __name__ == "__main__":
    main()
