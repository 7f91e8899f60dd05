"""``python -m chatseek_gateway``: serve the gateway."""

from chatseek_core.runner import main_for
from chatseek_gateway.server import start

main = main_for("gateway", start)

if __name__ == "__main__":
    main()
