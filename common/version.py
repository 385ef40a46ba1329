"""pptmc's version, in the ground layer so cache keys can name it without importing the CLI."""
VERSION = "0.1.0"
