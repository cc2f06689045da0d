"""Logic the ``eoslog`` commands and the console share, over the public client (Kafka keeps
the same in its tools' classes and Admin): the CLI parses and prints, the console renders,
both call these."""


class ToolError(Exception):
    """A failure a person must read (one line, no traceback): the CLI prints it on stderr, the
    console on the page."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code
