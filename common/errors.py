"""Error types shared by every stage, so the CLI can turn them into one clear message and exit code."""


class PptmcError(Exception):
    """A user-facing failure: the message names the file, the line or field, and what to do."""

    exit_code = 2


class InputError(PptmcError):
    """Bad input: C that does not parse, an unsupported pragma, a corrupt trace, an invalid machine file."""


class ToolError(PptmcError):
    """A required external tool (clang-19, libomp) is missing or failed."""

    exit_code = 3


class RunError(PptmcError):
    """The program under study crashed or exited non-zero."""

    exit_code = 4
