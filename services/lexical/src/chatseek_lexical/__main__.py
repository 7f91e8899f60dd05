"""``python -m chatseek_lexical``: serve the lexical service."""

from chatseek_core.runner import main_for
from chatseek_lexical.server import start

main = main_for("lexical", start)

if __name__ == "__main__":
    main()
