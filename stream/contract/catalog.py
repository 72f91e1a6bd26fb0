"""The item catalog (compacted item topic) and item-catalog records."""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from stream.contract.decoding import _DEFAULT_MAX_BYTES, _check_object_and_version, _decode, _features, _timestamp
from stream.contract.reasons import SCHEMA_VERSION, DeadLetter
from stream.contract.schemas import _schema_check

__all__ = ["ItemCatalog", "parse_item"]


class ItemCatalog:
    """In-memory view of the compacted item topic: ``item_id → {feature: float}``.

    The learner/explainer worker replays the item topic into one of these (latest record per key
    wins; a ``features: null`` record or a Kafka tombstone deletes the item) and passes it to
    :func:`parse_preference` / :func:`parse_click_session` to resolve ``{"id": ...}`` references.

    Examples
    --------
    >>> cat = ItemCatalog()
    >>> cat.upsert({"schema_version": 1, "item_id": "a", "features": {"price": 3.0}})
    >>> cat.get("a"), len(cat), "a" in cat
    ({'price': 3.0}, 1, True)
    >>> cat.upsert({"schema_version": 1, "item_id": "a", "features": None})
    >>> len(cat)
    0
    """

    def __init__(self) -> None:
        self._items: dict[str, dict[str, float]] = {}
        #: grows with every change (upsert or delete): arrays built from the catalog are cached by it
        #: (:func:`stream.contract.arrays.reference_items`)
        self.version = 0

    def upsert(self, record: Mapping[str, Any]) -> None:
        """Insert, replace or (``features`` None) delete one item.

        Parameters
        ----------
        record : dict
            An item-catalog record as returned by :func:`parse_item`.

        Raises
        ------
        DeadLetter
            ``missing_field`` if ``item_id`` is absent (records from :func:`parse_item` always
            have it).
        """
        try:
            item_id = record["item_id"]
        except (KeyError, TypeError):
            raise DeadLetter("missing_field", "An item-catalog record needs 'item_id'.") from None
        feats = record.get("features")
        self.version += 1
        if feats is None:
            self._items.pop(item_id, None)
        else:
            self._items[item_id] = dict(feats)

    def delete(self, item_id: str) -> None:
        """Remove an item (a Kafka tombstone on the item topic); no error if absent."""
        self.version += 1
        self._items.pop(item_id, None)

    def get(self, item_id: str) -> dict[str, float]:
        """Features of ``item_id`` (the stored dict; do not mutate it).

        Raises
        ------
        DeadLetter
            ``unknown_item`` if the catalog does not hold ``item_id``.
        """
        try:
            return self._items[item_id]
        except KeyError:
            raise DeadLetter("unknown_item", f"Item {item_id!r} is not in the item catalog ({len(self._items)} items); "
                                             "publish its item record first, or send inline features.") from None

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._items

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> Iterator[tuple[str, dict[str, float]]]:
        """Iterate over ``(item_id, features)`` pairs."""
        return iter(self._items.items())

    def __repr__(self) -> str:
        return f"ItemCatalog(n_items={len(self._items)})"


def _resolve(ref: Mapping[str, Any], catalog: ItemCatalog | None, where: str) -> tuple[dict[str, float], str | None]:
    feats = ref.get("features")
    item_id = ref.get("id")
    if feats is not None:
        return _features(feats, f"{where}.features"), item_id
    if catalog is None:
        raise DeadLetter("unknown_item", f"{where} references item {item_id!r} but no item catalog is configured; "
                                         "send inline features or run the worker with the item topic.")
    return catalog.get(item_id), item_id


def parse_item(raw: bytes | None, max_bytes: int = _DEFAULT_MAX_BYTES, key: bytes | str | None = None) -> dict:
    """Parse and validate one item-catalog record (``item.v1.json``).

    Parameters
    ----------
    raw : bytes or None
        The message value. ``None`` is a Kafka tombstone: pass the message ``key`` and a delete
        record (``features`` None) for that item comes back.
    max_bytes : int, default 1 MiB
    key : bytes or str, optional
        The message key (item id); only used for tombstones.

    Returns
    -------
    dict
        ``{"schema_version": 1, "item_id": str, "features": {str: float} | None, ...}``; feed it to
        :meth:`ItemCatalog.upsert`.

    Raises
    ------
    DeadLetter
        As :func:`parse_preference`; a tombstone without a key is ``missing_field``.
    """
    if raw is None:
        if key is None or key in (b"", ""):
            raise DeadLetter("missing_field", "An item tombstone (null value) needs the item id as message key.")
        item_id = key.decode("utf-8", "replace") if isinstance(key, (bytes, bytearray)) else str(key)
        return {"schema_version": SCHEMA_VERSION, "item_id": item_id, "features": None}
    d = _check_object_and_version(_decode(raw, max_bytes), "item record")
    _schema_check("item", d)
    out = dict(d)
    if d["features"] is not None:
        out["features"] = _features(d["features"], "features")
    if "timestamp" in d:
        out["timestamp"] = _timestamp(d["timestamp"])
    return out

