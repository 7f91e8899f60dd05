"""``python -m chatseek_vector``: serve the vector service."""

from chatseek_core.runner import main_for
from chatseek_vector.server import start

main = main_for("vector", start)

if __name__ == "__main__":
    main()
