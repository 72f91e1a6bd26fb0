"""``prefstream dead-letters``: summarise, export and re-drive the dead-letter topic (:mod:`stream.dead_letter_topic`).

Registered on the ``prefstream`` app by :mod:`stream.cli`. Exit status: 0 done; 2 a user mistake (an
unknown ``--reason``, a dead-letter topic that does not exist, an unwritable ``--to`` file), one
``error:`` line; 1 the broker does not answer or refuses a re-driven record.
"""

from __future__ import annotations

import json
from typing import List, Optional

import typer

from learners.exceptions import PrefstreamError
from stream.cli_setup import _one_line, _parse_sets, _require_broker, _require_topics, _settings

__all__ = ["dead_letters_cmd", "format_summary"]


def format_summary(topic: str, summary: dict) -> str:
    """The summary as a table (one row per reason and source topic) under a one-line header.

    Examples
    --------
    >>> s = {"total": 2, "unreadable": 0, "groups": [{"reason": "malformed_json", "source_topic": "p", "count": 2,
    ...      "first": "0:3", "last": "0:9", "source_offsets": [10, 12], "sample": "{bad", "sample_encoding": "utf-8",
    ...      "detail": "x"}]}
    >>> print(format_summary("dl", s))
    2 dead letters on dl
    reason          source  count  first  last  source offsets  sample
    malformed_json  p           2  0:3    0:9   10..12          '{bad'
    """
    head = f"{summary['total']} dead letter{'s' if summary['total'] != 1 else ''} on {topic}"
    if summary.get("unreadable"):
        head += f" ({summary['unreadable']} records there are not dead-letter records)"
    if not summary["groups"]:
        return head
    rows = [("reason", "source", "count", "first", "last", "source offsets", "sample")]
    for g in summary["groups"]:
        lo, hi = g["source_offsets"]
        sample = "(none)" if g["sample"] is None else repr(g["sample"]) + (" [base64]" if g["sample_encoding"] == "base64" else "")
        rows.append((g["reason"], g["source_topic"], str(g["count"]), g["first"], g["last"],
                     "" if lo is None else f"{lo}..{hi}", sample))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for r in rows:
        cells = [r[i].rjust(widths[i]) if i == 2 and r is not rows[0] else r[i].ljust(widths[i]) for i in range(len(widths))]
        lines.append("  ".join(cells + [r[-1]]).rstrip())
    return head + "\n" + "\n".join(lines)


def dead_letters_cmd(
    config: Optional[str] = typer.Option(None, "--config", "-c", help="TOML or JSON settings file (default $PREFSTREAM_CONFIG)."),
    bootstrap: Optional[str] = typer.Option(None, "--bootstrap", "-b", help="Kafka bootstrap servers host:port[,host:port]."),
    topic: Optional[str] = typer.Option(None, "--topic", help="The dead-letter topic (setting topic_dead_letters)."),
    reason: Optional[str] = typer.Option(None, "--reason", help="Only dead letters of this reason."),
    source: Optional[str] = typer.Option(None, "--source", help="Only dead letters from this source topic."),
    redrive: bool = typer.Option(False, "--redrive", help="Re-send the raw payloads to their source topics "
                                                          "(idempotent by event id: a second redrive sends nothing new)."),
    to: Optional[str] = typer.Option(None, "--to", help="Export the dead letters to this file (JSON lines)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary (and the redrive counts) as JSON."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Any setting as key=value (JSON values accepted), repeatable."),
):
    """List and summarise the dead-letter topic by reason and source; --redrive re-sends, --to exports."""
    from stream.contract.reasons import DEAD_LETTER_REASONS, REQUEST_REFUSALS
    from stream.dead_letter_topic import export, read_dead_letters, summarize
    from stream.dead_letter_topic import redrive as do_redrive

    s = _settings(config, {"bootstrap_servers": bootstrap, **_parse_sets(set_)})
    known = DEAD_LETTER_REASONS + REQUEST_REFUSALS
    if reason is not None and reason not in known:
        typer.echo(f"error: Unknown dead-letter reason {reason!r}; one of {', '.join(known)}.", err=True)
        raise typer.Exit(2)
    name = topic or s.topic_dead_letters
    _require_broker(s)
    _require_topics(s, [name])
    opts = s.kafka_client_options()
    opts.pop("client_id", None)
    try:
        entries = read_dead_letters(opts, name)
    except (PrefstreamError, TimeoutError) as exc:
        typer.echo(f"error: {_one_line(exc)}", err=True)
        raise typer.Exit(1) from None
    summary = summarize(entries, reason, source)
    out: dict = {"topic": name, **summary}
    if to is not None:
        try:
            out["exported"] = export(entries, to, name, reason, source)
        except OSError as exc:
            typer.echo(f"error: Cannot write {to!r}: {exc.strerror or exc}.", err=True)
            raise typer.Exit(2) from None
    if redrive:
        try:
            out["redrive"] = do_redrive(entries, opts, name, reason, source)
        except Exception as exc:  # noqa: BLE001 - the broker refused a record: one line, not a traceback
            typer.echo(f"error: redrive failed: {_one_line(exc)}", err=True)
            raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps(out, indent=1, default=str))
        return
    typer.echo(format_summary(name, summary))
    if "exported" in out:
        typer.echo(f"exported {out['exported']} dead letters to {to}")
    if "redrive" in out:
        r = out["redrive"]
        skipped = [f"{r[k]} {k.replace('_', ' ')}" for k in ("already_redriven", "truncated", "no_payload", "missing_topic") if r[k]]
        where = ", ".join(f"{n} to {t}" for t, n in sorted(r["by_topic"].items()))
        typer.echo(f"redrove {r['sent']} dead letters{' (' + where + ')' if where else ''}"
                   f"{'; skipped ' + ', '.join(skipped) if skipped else ''}")
