"""Errors the command line reports as one clear line instead of a traceback."""


class UserError(Exception):
    """A mistake the user can fix (missing input, bad flag, unreadable file).

    The CLI prints it as ``beam-bpe CMD: error: MESSAGE`` and exits with code 2.
    """


class JobFailed(Exception):
    """A job that failed on the runner it was sent to (a Flink or Spark cluster): what the
    runner said, in one line, and where the rest is.

    The CLI prints it as ``beam-bpe CMD: error: MESSAGE`` and exits with code 1.
    """
