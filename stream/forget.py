"""``prefstream forget USER_ID``: a forget record to every partition of the preference topic.

The record (``stream/schemas/forget.v1.json``, :func:`stream.contract.people.forget_record`) is
sent to each partition rather than to the one the user id's key would pick: the person's
events may have been placed by another client's partitioner (librdkafka's and the Java
client's differ), and a learner that does not hold the person ignores it. On the person's
partition it comes after every event of theirs sent before it, so the learner that owns them
learns those, then drops the person: memory, its local store, and a tombstone for
``<model>@<user_id>`` on ``prefstream.people`` in its next snapshot round, before the forget
record's offset is committed (``docs/personal.md``).
"""

from __future__ import annotations

import uuid

from learners.exceptions import InvalidInputError
from stream.broker import BrokerError
from stream.contract import DeadLetter
from stream.contract.people import forget_record

__all__ = ["send_forget"]


def send_forget(settings, user_id: str, timeout_s: float = 30.0) -> tuple[str, int]:
    """Send a forget record for ``user_id`` to every partition of ``settings.topic_preferences``.

    Returns
    -------
    (request_id, partitions)

    Raises
    ------
    InvalidInputError
        If ``user_id`` is not a string of 1 to 512 characters.
    BrokerError
        If the topic does not exist or a record was not delivered.
    """
    from stream.broker.producer import Sender

    request_id = f"forget-{uuid.uuid4().hex}"
    try:
        value = forget_record(user_id, request_id)
    except DeadLetter as dl:
        raise InvalidInputError(f"Cannot forget {user_id[:40]!r}: {dl.detail}") from None
    failures: list[str] = []
    opts = {**settings.kafka_client_options(), **settings.producer_options()}
    sender = Sender(opts, on_failure=lambda reason, msg: failures.append(f"{reason}: {msg}"))
    if not sender.probe(settings.broker_wait_seconds):
        raise BrokerError(f"No Kafka broker answered at {settings.bootstrap_servers}.")
    meta = sender._p.list_topics(settings.topic_preferences, timeout=settings.broker_wait_seconds)  # noqa: SLF001
    topic = meta.topics.get(settings.topic_preferences)
    if topic is None or topic.error is not None or not topic.partitions:
        raise BrokerError(f"Topic {settings.topic_preferences!r} does not exist; create it with "
                          "`prefstream topics create`.")
    parts = sorted(topic.partitions)
    for p in parts:
        sender.send(settings.topic_preferences, user_id.encode(), value, partition=p)
    left = sender.flush(timeout_s)
    if failures or left:
        raise BrokerError(f"The forget record was not delivered to every partition of "
                          f"{settings.topic_preferences!r}: {failures[0] if failures else 'timed out'}.")
    return request_id, len(parts)
