"""The Kafka compression codecs the workers must read: checked before a worker starts.

Producers choose the codec of each record batch (``compression.type``: none, gzip, snappy, lz4,
zstd), and a consumer that lacks one cannot decode the batch: aiokafka raises
``UnsupportedCodecError`` from inside Faust's fetcher, which stops the worker (issue 12: Kafka's
Java console producer with ``--compression-codec zstd`` crashed both workers). The libraries are
pinned in ``requirements.txt`` (aiokafka reads snappy/lz4/zstd through ``cramjam``; kafka-python,
used by replay and tail, through ``python-snappy``, ``lz4`` and ``zstandard``); a worker checks
them with :func:`require_codecs` at start and refuses to run without one, with a message naming
the package, rather than crash on the first compressed batch.
"""

from __future__ import annotations

from learners.exceptions import PrefstreamError

__all__ = ["CODECS", "CodecMissing", "missing_codecs", "require_codecs"]

#: Every Kafka compression codec.
CODECS = ("gzip", "snappy", "lz4", "zstd")

_PACKAGES = {"aiokafka": {"gzip": "(standard library)", "snappy": "cramjam", "lz4": "cramjam", "zstd": "cramjam"},
             "kafka-python": {"gzip": "(standard library)", "snappy": "python-snappy", "lz4": "lz4",
                              "zstd": "zstandard"}}


class CodecMissing(PrefstreamError, RuntimeError):
    """A Kafka client lacks the library of a compression codec."""


def missing_codecs() -> list[tuple[str, str, str]]:
    """``(client, codec, package to install)`` for every codec a client cannot decode."""
    import aiokafka.codec as ac
    import kafka.codec as kc

    out = []
    for client, mod in (("aiokafka", ac), ("kafka-python", kc)):
        for codec in CODECS:
            if not getattr(mod, f"has_{codec}")():
                out.append((client, codec, _PACKAGES[client][codec]))
    return out


def require_codecs() -> None:
    """Raise :class:`CodecMissing` (one line, naming the packages) unless every codec decodes.

    Raises
    ------
    CodecMissing
    """
    miss = missing_codecs()
    if miss:
        pkgs = sorted({p for _, _, p in miss})
        what = ", ".join(f"{codec} ({client})" for client, codec, _ in miss)
        raise CodecMissing(f"Cannot decode Kafka batches compressed with {what}: install {', '.join(pkgs)} "
                           "(pinned in requirements.txt), or the worker would stop on the first such batch.")
