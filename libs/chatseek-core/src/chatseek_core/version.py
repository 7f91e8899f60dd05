"""The chatseek release every service and the CLI report."""

VERSION = "0.1.0"
