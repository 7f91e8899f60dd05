"""chatseek fusion service: hybrid and conversation search, readers."""
