"""``python -m chatseek_embed``: serve the embed service."""

from chatseek_core.runner import main_for
from chatseek_embed.server import start

# Inference needs tens of MiB of fresh activations per batch: glibc's sliding thresholds keep
# them in the heap for the next call instead of mapping and faulting them in every time.
main = main_for("embed", start, hold_thresholds=False)

if __name__ == "__main__":
    main()
