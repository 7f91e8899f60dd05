"""``python -m chatseek_fusion``: serve the fusion service."""

from chatseek_core.runner import main_for
from chatseek_fusion.server import start

main = main_for("fusion", start)

if __name__ == "__main__":
    main()
