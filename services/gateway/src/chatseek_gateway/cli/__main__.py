"""``python -m chatseek_gateway.cli``: the chatseek CLI."""

from chatseek_gateway.cli import main

raise SystemExit(main())
