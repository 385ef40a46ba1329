"""The CLI's subcommands, one module per stage; each exposes `register(subparsers)`."""
