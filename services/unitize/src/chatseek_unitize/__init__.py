"""chatseek unitize: cuts chat history into units and reconstructs conversations."""
