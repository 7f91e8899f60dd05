"""chatseek gateway: the gRPC facade, the chatseek CLI and the MCP server."""
