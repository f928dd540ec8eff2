"""What torch_cudajit reports of its work, through Python's logging.

The core (csrc/log.h) reports each source it reads (from the disk cache or through the front
end), each compile with the kernel's signature and architecture and whether the disk cache
answered, and, at DEBUG, each NVRTC run with its options. All of it goes to the
``torch_cudajit`` logger. ``TORCH_CUDAJIT_LOG=info`` (or ``1``) or ``=debug`` (or ``+``) sets
that logger's level and, when nothing else handles it, prints to stderr; an application may
instead configure the logger like any other. ``TORCH_CUDAJIT_DUMP=<folder>`` writes every
source NVRTC compiles there, and compile errors name the file. Launches report nothing."""
import atexit
import logging

from ._loader import _C

logger = logging.getLogger("torch_cudajit")


def _configure() -> None:
    level = _C.log_level_from_env()
    if level:
        logger.setLevel(level)
        if not logger.handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("[torch_cudajit %(levelname)s] %(message)s"))
            logger.addHandler(handler)
    _C.set_log_sink(_emit)
    # Nothing reports into an interpreter that is shutting down.
    atexit.register(_C.set_log_sink, None)


def _emit(level: int, message: str) -> None:
    if logger.isEnabledFor(level):
        logger.log(level, message)
