"""``python -m chatseek_unitize``: serve the unitize service."""

from chatseek_unitize.linkahead import keep_grpc_out_of_forks

# Before gRPC is imported: a conversation build forks a child that uses no gRPC.
keep_grpc_out_of_forks()

from chatseek_core.runner import main_for  # noqa: E402
from chatseek_unitize.server import start  # noqa: E402

main = main_for("unitize", start)

if __name__ == "__main__":
    main()
