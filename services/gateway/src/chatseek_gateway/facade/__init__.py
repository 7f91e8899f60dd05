"""The gateway's RPCs, one mixin per area, combined into ``GatewayServicer`` in ``service``."""
