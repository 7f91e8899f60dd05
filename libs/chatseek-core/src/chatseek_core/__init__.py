"""What two chatseek services would otherwise copy: settings, logging, db, feeds, errors, server."""
