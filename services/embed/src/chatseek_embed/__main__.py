"""``python -m chatseek_embed``: serve the embed service."""

from chatseek_core.runner import main_for
from chatseek_embed.server import start

# Inference needs tens of MiB of fresh activations per batch: thresholds held high keep them in
# the heap for the next call instead of mapping and faulting them in every time; the service
# gives them back once inference has idled (``service.IDLE_RELEASE_S``).
main = main_for("embed", start, inference=True)

if __name__ == "__main__":
    main()
