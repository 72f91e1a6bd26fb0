"""Settings: defaults < config file < environment < overrides; clear errors."""

from __future__ import annotations

import dataclasses
import json

import pytest

from learners.exceptions import InvalidParameterError
from stream.settings import Settings

TOML = """
bootstrap_servers = "file-broker:9092"
consumer_group = "from-file"
snapshot_every_events = 500
explain_sample_rate = 0.5
models = ["linear-bt", "capacity"]
feature_names = ["price", "rating"]

[model_params.linear-bt]
learning_rate = 0.05
l2 = 0.001
"""


@pytest.fixture
def toml_file(tmp_path):
    p = tmp_path / "prefstream.toml"
    p.write_text(TOML)
    return p


def test_defaults():
    s = Settings.load(None, None, environ={})
    assert s.bootstrap_servers == "127.0.0.1:9092" and s.security_protocol == "PLAINTEXT"
    assert (s.topic_preferences, s.topic_clicks, s.topic_items, s.topic_models, s.topic_explain_requests,
            s.topic_explanations, s.topic_dead_letters) == (
        "prefstream.preferences", "prefstream.clicks", "prefstream.items", "prefstream.models",
        "prefstream.explain-requests", "prefstream.explanations", "prefstream.dead-letters")
    assert s.models == ["linear-bt"] and s.feature_names is None and s.model_params == {}
    assert (s.snapshot_every_events, s.snapshot_every_seconds, s.explain_sample_rate) == (1000, 30.0, 0.05)
    assert s.port_for("learner") == 9464 and s.port_for("explainer") == 9465
    assert s.max_message_bytes == 1_048_576
    # every field is documented and bound to PREFSTREAM_<NAME>
    for name, var, _default, doc in Settings.describe():
        assert var == "PREFSTREAM_" + name.upper() and doc


def test_precedence_file_env_overrides(toml_file):
    env = {"PREFSTREAM_CONSUMER_GROUP": "from-env", "PREFSTREAM_SNAPSHOT_EVERY_EVENTS": "700"}
    s = Settings.load(toml_file, {"snapshot_every_events": 900, "topic_models": None}, environ=env)
    assert s.bootstrap_servers == "file-broker:9092"  # file only
    assert s.consumer_group == "from-env"  # env beats file
    assert s.snapshot_every_events == 900  # overrides beat env and file
    assert s.explain_sample_rate == 0.5 and s.models == ["linear-bt", "capacity"]
    assert s.topic_models == "prefstream.models"  # None override = flag not given
    assert s.params_for("linear-bt") == {"learning_rate": 0.05, "l2": 0.001} and s.params_for("gpm") == {}
    # each layer alone
    assert Settings.load(toml_file, environ={}).snapshot_every_events == 500
    assert Settings.load(None, environ=env).snapshot_every_events == 700
    assert Settings.load(None, {"snapshot_every_events": 3}, environ={}).snapshot_every_events == 3


def test_json_config_and_prefstream_config_variable(tmp_path):
    p = tmp_path / "conf.json"
    p.write_text(json.dumps({"topic_preferences": "my.prefs", "model_params": {"linear-bt": {"scale": False}}}))
    s = Settings.load(None, None, environ={"PREFSTREAM_CONFIG": str(p)})
    assert s.topic_preferences == "my.prefs" and s.params_for("linear-bt") == {"scale": False}


def test_environment_value_parsing():
    env = {
        "PREFSTREAM_MODELS": "linear-bt, capacity",
        "PREFSTREAM_FEATURE_NAMES": '["a", "b"]',
        "PREFSTREAM_CONTEXT_NAMES": "",
        "PREFSTREAM_MODEL_PARAMS": '{"capacity": {"k": 2}}',
        "PREFSTREAM_SNAPSHOT_EVERY_SECONDS": "2.5",
        "PREFSTREAM_METRICS_PORT": "9999",
        "PREFSTREAM_SECURITY_PROTOCOL": "sasl_ssl",
        "PREFSTREAM_SASL_MECHANISM": "SCRAM-SHA-512",
        "PREFSTREAM_SASL_USERNAME": "alice",
        "PREFSTREAM_SASL_PASSWORD": "s3cret",
        "PREFSTREAM_UNRELATED_THING": "ignored",
    }
    s = Settings.load(None, None, environ=env)
    assert s.models == ["linear-bt", "capacity"] and s.feature_names == ["a", "b"] and s.context_names is None
    assert s.model_params == {"capacity": {"k": 2}} and s.snapshot_every_seconds == 2.5
    assert s.port_for("learner") == s.port_for("explainer") == 9999
    assert s.security_protocol == "SASL_SSL"
    opts = s.kafka_client_options()
    assert opts["sasl_mechanism"] == "SCRAM-SHA-512" and opts["sasl_plain_username"] == "alice"
    assert opts["sasl_plain_password"] == "s3cret" and opts["security_protocol"] == "SASL_SSL"
    # the password never shows
    assert "s3cret" not in repr(s) and s.as_dict()["sasl_password"] == "***"
    assert s.as_dict(redact=False)["sasl_password"] == "s3cret"


def test_bootstrap_alias_and_helpers():
    s = Settings.load(None, None, environ={"PREFSTREAM_BOOTSTRAP": "k1:9092,k2:9093"})
    assert s.bootstrap_servers == "k1:9092,k2:9093"
    assert s.kafka_client_options()["bootstrap_servers"] == ["k1:9092", "k2:9093"]
    both = {"PREFSTREAM_BOOTSTRAP": "alias:1", "PREFSTREAM_BOOTSTRAP_SERVERS": "canonical:2"}
    assert Settings.load(None, None, environ=both).bootstrap_servers == "canonical:2"
    with pytest.raises(InvalidParameterError):
        s.port_for("janitor")


@pytest.mark.parametrize("protocol,mechanism", [("PLAINTEXT", None), ("SSL", None), ("SASL_PLAINTEXT", "PLAIN"),
                                                ("SASL_SSL", "SCRAM-SHA-512")])
def test_every_client_library_gets_the_same_security_settings(protocol, mechanism):
    """kafka-python (tail, topics) and aiokafka (learner, explainer, followers, serve)."""
    import ssl

    from stream.broker.clients import aiokafka_options

    env = {"PREFSTREAM_SECURITY_PROTOCOL": protocol}
    if mechanism:
        env.update({"PREFSTREAM_SASL_MECHANISM": mechanism, "PREFSTREAM_SASL_USERNAME": "alice",
                    "PREFSTREAM_SASL_PASSWORD": "pw"})
    s = Settings.load(None, None, environ=env)
    ak = aiokafka_options(s)
    kp = s.kafka_client_options()
    assert ak["security_protocol"] == kp["security_protocol"] == protocol
    sasl = ("sasl_mechanism", "sasl_plain_username", "sasl_plain_password")
    want = dict(zip(sasl, (mechanism, "alice", "pw"))) if mechanism else {}
    assert {k: ak[k] for k in sasl if k in ak} == want
    assert {k: kp[k] for k in sasl if k in kp} == want
    for ctx in (ak.get("ssl_context"),):
        if protocol.endswith("SSL"):  # certificate and host name verified
            assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
        else:
            assert ctx is None


@pytest.mark.parametrize("where,key,value,match", [
    ("overrides", "snapshot_every_event", 5, "Did you mean 'snapshot_every_events'"),
    ("file", "topic_prefs", "x", "Unknown setting 'topic_prefs' in config file"),
    ("overrides", "snapshot_every_events", "many", "must be an integer"),
    ("overrides", "snapshot_every_events", 0, r"range \[1, inf\)"),
    ("overrides", "explain_sample_rate", 1.5, r"\[0.0, 1.0\]"),
    ("overrides", "snapshot_every_seconds", 0, r"range \(0, inf\)"),
    ("overrides", "models", [], "non-empty list"),
    ("overrides", "models", "linear-bt", "list of non-empty strings"),
    ("overrides", "security_protocol", "TLS", "one of"),
    ("overrides", "model_params", {"linear-bt": 3}, "model_params"),
    ("overrides", "max_message_bytes", True, "integer"),
    ("env", "PREFSTREAM_SNAPSHOT_EVERY_EVENTS", "ten", "from environment variable PREFSTREAM_SNAPSHOT_EVERY_EVENTS"),
    ("env", "PREFSTREAM_MODEL_PARAMS", "{not json", "must be a JSON object"),
    ("env", "PREFSTREAM_FEATURE_NAMES", "[1, 2", "comma-separated list or a JSON array"),
    ("env", "PREFSTREAM_EXPLAIN_SAMPLE_RATE", "nan", "finite number"),
    ("file", "metrics_port", 70000, r"\[0, 65535\]"),
    ("file", "feature_names", "price", "list of non-empty strings"),
])
def test_errors_name_key_source_and_expectation(tmp_path, where, key, value, match):
    env, overrides, cfg = {}, {}, None
    if where == "env":
        env[key] = value
    elif where == "overrides":
        overrides[key] = value
    else:
        cfg = tmp_path / "c.json"
        cfg.write_text(json.dumps({key: value}))
    with pytest.raises(InvalidParameterError, match=match):
        Settings.load(cfg, overrides, environ=env)


def test_sasl_needs_a_mechanism():
    with pytest.raises(InvalidParameterError, match="sasl_mechanism"):
        Settings.load(None, {"security_protocol": "SASL_PLAINTEXT"}, environ={})


def test_bad_config_files(tmp_path):
    with pytest.raises(InvalidParameterError, match="Cannot read"):
        Settings.load(tmp_path / "missing.toml", environ={})
    y = tmp_path / "c.yaml"
    y.write_text("a: 1")
    with pytest.raises(InvalidParameterError, match=".toml or .json"):
        Settings.load(y, environ={})
    t = tmp_path / "c.toml"
    t.write_text("this is = = not toml")
    with pytest.raises(InvalidParameterError, match="not valid TOML"):
        Settings.load(t, environ={})
    j = tmp_path / "c.json"
    j.write_text("[1, 2]")
    with pytest.raises(InvalidParameterError, match="table/object"):
        Settings.load(j, environ={})


def test_frozen_and_direct_construction_validates():
    s = Settings.load(None, None, environ={})
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.models = ["x"]
    with pytest.raises(InvalidParameterError):
        Settings(snapshot_every_events=-3)
    assert Settings(snapshot_every_events=5.0).snapshot_every_events == 5


def test_docs_list_every_setting_and_the_example_file_loads(tmp_path):
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "contract.md").read_text(encoding="utf-8")
    for name, var, _d, _doc in Settings.describe():
        assert f"| `{name}` | `{var}` |" in text, name
    toml = re.search(r"```toml\n(.*?)```", text, flags=re.S).group(1)
    p = tmp_path / "doc.toml"
    p.write_text(toml)
    s = Settings.load(p, None, environ={"PREFSTREAM_SASL_PASSWORD": "pw"})
    assert s.security_protocol == "SASL_SSL" and s.params_for("linear-bt") == {"learning_rate": 0.05, "l2": 1e-4}
    assert s.kafka_client_options()["sasl_plain_password"] == "pw"
