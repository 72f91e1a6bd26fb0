"""A server whose model topic does not exist says so (issue 30 item 6), on the real broker.

Before: ``/v1/rank`` answered "the server is still reading prefstream.models" for a topic that does
not exist (the README's serve command after a demo had deleted its topics). Now the follower notices
the topic is missing (:attr:`stream.workers.follower.TopicFollower.missing`) and the 503 names the
topic and ``prefstream topics create``; once the topic is created the message is the ordinary one.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from stream.serving.errors import APIError

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


async def _until(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def _message(state, name: str) -> str:
    with pytest.raises(APIError) as err:
        state.version(name)
    assert err.value.status == 503
    return str(err.value.detail)


def test_a_missing_model_topic_is_named_then_the_ordinary_message_once_it_exists(kafka_bootstrap, kafka_options):
    from stream.broker import TopicSpec, create_topics, missing_topics
    from stream.models import register_all
    from stream.serving.service import ServeState
    from stream.settings import Settings

    register_all()
    u = uuid.uuid4().hex[:10]
    models_topic, items_topic = f"test.missing.models.{u}", f"test.missing.items.{u}"
    create_topics(None, {items_topic: TopicSpec(1, {})}, client_options=kafka_options)
    s = Settings(bootstrap_servers=kafka_bootstrap, topic_models=models_topic, topic_items=items_topic,
                 serve_models=["gpm"])

    async def scenario():
        state = ServeState(s)
        await state.start()
        try:
            await _until(lambda: state.followers[0].missing, 30, "the follower to see the topic missing")
            msg = _message(state, "gpm")
            assert models_topic in msg and "does not exist" in msg and "prefstream topics create" in msg
            assert "still reading" not in msg
            assert missing_topics(kafka_bootstrap, [models_topic], kafka_options) == [models_topic]   # not auto-created
            create_topics(None, {models_topic: TopicSpec(1, {"cleanup.policy": "compact"})}, client_options=kafka_options)
            await _until(lambda: state.followers[0].caught_up.is_set(), 30, "the follower to find the new topic")
            assert state.followers[0].missing is False
            msg = _message(state, "gpm")
            assert "has no published snapshot" in msg and models_topic in msg
        finally:
            await state.stop()

    try:
        asyncio.run(scenario())
    finally:
        from kafka.admin import KafkaAdminClient

        admin = KafkaAdminClient(**kafka_options)
        try:
            admin.delete_topics([models_topic, items_topic])
        except Exception:  # noqa: BLE001 - best effort; the names are unique
            pass
        finally:
            admin.close()
