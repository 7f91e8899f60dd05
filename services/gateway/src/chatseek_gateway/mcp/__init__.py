"""The MCP server: chatseek's operations as tools for AI agents.

``server.build_server`` makes the server (``tools``, ``instructions``); ``stdio.serve_stdio``
runs it for a local agent (``chatseek mcp``) and ``http.serve_http`` as a streamable HTTP
endpoint inside the gateway process, behind a bearer token. Heavy imports stay in submodules.
"""
