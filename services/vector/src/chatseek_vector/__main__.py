"""``python -m chatseek_vector``: serve the vector service."""

import os

# One BLAS thread. The service's matrix work is small (a query against a few thousand vectors)
# and runs beside the other services on the same cores; OpenBLAS's pool of one thread per core
# spins after each call, doubling a query's CPU for no gain in its wall time. Set before numpy
# loads OpenBLAS; a value from the environment wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from chatseek_core.runner import main_for  # noqa: E402 - after the thread setting
from chatseek_vector.server import start  # noqa: E402

main = main_for("vector", start)

if __name__ == "__main__":
    main()
