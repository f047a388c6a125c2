"""The settings of a knowledge base that may change after it is made, and what a change does
to the gate's calibration (``citewise kb set NAME key=value ...`` and the ``[kb]`` table of
``citewise.toml``).

Keys: ``generator``, ``gate_policy``, ``reader`` (``auto``, ``citewise-reader`` or ``none``:
the reading model of the gate, the extractive answer and the citation check) and the
retrieval settings (``context_k``, ``fusion``,
``dense_weight``, ``rrf_k``, ``dense_k``, ``bm25_k``, ``mmr``, ``mmr_lambda`` and the
``keyword_*`` shares), checked as they are when a knowledge base is made. The embedder and the
chunker are not among them: they shaped the stored vectors and chunks (``citewise replay
--switch`` moves a knowledge base to another embedder).

A calibrated threshold holds for the embedder and the retrieval settings it was measured with
(``KBConfig.fingerprint``). Changing a retrieval setting leaves it stored but stale: the gate
uses the shipped default, with a warning, until ``citewise calibrate`` runs again or the
setting is changed back. Changing ``gate_policy`` replaces it with the shipped default of the
new policy. The generator does not touch the gate.

This is an operator's tool (the CLI, on the store); the HTTP service offers no route to it, and
it still refuses a generator its operator did not allow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from citewise.answer import gate
from citewise.errors import ConfigError, UnknownNameError
from citewise.kb import GateSetting, KBConfig, Retrieval

RETRIEVAL_TYPES: dict[str, str] = {f.name: str(f.type) for f in dataclasses.fields(Retrieval)}
KEYS: tuple[str, ...] = ("generator", "gate_policy", "reader", *RETRIEVAL_TYPES)
READERS = ("auto", "citewise-reader", "none")
TOGETHER = ("keyword_rare_share", "keyword_drop_share")  # valid only as a pair
TRUE, FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def check_generator(spec: str) -> str:
    """A generator spec as the registry reads it; no key is needed yet and nothing is called."""
    from citewise.generators import REGISTRY
    from citewise.hosted import compatible_spec

    prefix, _, arg = spec.partition(":")
    if prefix not in REGISTRY:
        raise UnknownNameError("generator", prefix, list(REGISTRY))
    if prefix == "openai-compatible":
        compatible_spec("generator", arg)
    elif prefix in ("openai", "gemini") and not arg:
        raise ConfigError(f"the {prefix} generator needs a model: {prefix}:MODEL")
    return spec


KINDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string"}


def _typed(key: str, kind: str, value: Any) -> Any:
    if isinstance(value, str):  # from the command line
        text = value.strip()
        try:
            if kind == "int":
                return int(text)
            if kind == "float":
                return float(text)
        except ValueError:
            raise ConfigError(f"{key} takes {KINDS[kind]}, not {value!r}") from None
        if kind == "bool":
            if text.lower() in TRUE + FALSE:
                return text.lower() in TRUE
            raise ConfigError(f"{key} takes {KINDS[kind]}, not {value!r}")
        return text
    ok = {"int": isinstance(value, int) and not isinstance(value, bool),
          "float": isinstance(value, int | float) and not isinstance(value, bool),
          "bool": isinstance(value, bool)}.get(kind, False)
    if not ok:
        raise ConfigError(f"{key} takes {KINDS[kind]}, not {value!r}")
    return float(value) if kind == "float" else value


def check_value(key: str, value: Any) -> Any:
    """One setting's value, typed and checked alone (``ConfigError`` says what is valid)."""
    if key not in KEYS:
        raise UnknownNameError("knowledge base setting", key, list(KEYS))
    if key == "reader":
        if not isinstance(value, str) or value.strip() not in READERS:
            raise ConfigError(f"reader takes one of {', '.join(READERS)}, not {value!r}")
        return value.strip()
    if key in ("generator", "gate_policy"):
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{key} takes a spec string, not {value!r}")
        if key == "generator":
            return check_generator(value.strip())
        return gate.get_policy(value.strip()).spec
    typed = _typed(key, RETRIEVAL_TYPES[key], value)
    if key in TOGETHER:  # each in (0, 1]; their order is checked by check_together
        if not 0.0 < typed <= 1.0:
            raise ConfigError(f"retrieval setting {key} must be above 0 and at most 1")
    else:
        replace(Retrieval(), **{key: typed}).validate()
    return typed


def check_together(values: Mapping[str, Any]) -> None:
    replace(Retrieval(), **{k: v for k, v in values.items() if k in RETRIEVAL_TYPES}).validate()


def parse_assignment(text: str) -> tuple[str, Any]:
    """``key=value`` from the command line, checked."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"expected key=value, not {text!r}; keys: {', '.join(KEYS)}")
    key = key.strip()
    return key, check_value(key, value)


def current(config: KBConfig, key: str) -> Any:
    if key == "generator":
        return config.generator
    if key == "reader":
        return config.reader
    if key == "gate_policy":
        return gate.gate_for(config)[0].policy
    return getattr(config.retrieval, key)


def calibration(config: KBConfig) -> str:
    """``calibrated``, ``stale`` (measured with other settings) or ``default`` (never)."""
    g = config.gate
    if g is None or g.source != "calibrated":
        return "default"
    return "calibrated" if g.fingerprint == config.fingerprint() else "stale"


@dataclass(frozen=True)
class Change:
    """The new settings, what changed (``key: (old, new)``) and what a person should know."""

    config: KBConfig
    changed: dict[str, tuple[Any, Any]]
    calibration: str
    notes: tuple[str, ...]


def _gate_text(config: KBConfig) -> str:
    g, _ = gate.gate_for(config)
    return f"{g.policy} >= {g.threshold:.3f}"


def _stale_note(name: str, old: GateSetting, new: KBConfig) -> str:
    return (f"The gate's calibrated threshold ({old.policy} >= {old.threshold:.3f}) was measured "
            f"with the old retrieval settings and is now stale: until you calibrate again the "
            f"gate uses {_gate_text(new)} and answers carry a warning. Recalibrate with "
            f"`citewise calibrate --kb {name} QUERIES.jsonl` (or set the old values back).")


def apply(name: str, config: KBConfig, values: Mapping[str, Any]) -> Change:
    """``config`` with ``values`` (already checked by ``check_value``) set."""
    changed = {k: (current(config, k), v) for k, v in values.items() if current(config, k) != v}
    retrieval = {k: v for k, (_, v) in changed.items() if k in RETRIEVAL_TYPES}
    new = replace(config, retrieval=replace(config.retrieval, **retrieval).validate())
    if "generator" in changed:
        new = replace(new, generator=changed["generator"][1])
    if "reader" in changed:
        new = replace(new, reader=changed["reader"][1])
    old, before, notes = config.gate, calibration(config), []
    if "gate_policy" in changed:
        policy = changed["gate_policy"][1]
        new = replace(new, gate=gate.default_setting(new, policy))
        if old is not None and before != "default":
            notes.append(f"The calibrated threshold ({old.policy} >= {old.threshold:.3f}) belonged "
                         f"to the old policy; the gate now uses {_gate_text(new)}. Recalibrate "
                         f"with `citewise calibrate --kb {name} --policy {policy} QUERIES.jsonl`.")
        if new.gate is not None and new.gate.source == "unmeasured":
            notes.append(f"No threshold was measured for {new.embedder} with {policy}: the gate "
                         f"uses 0.5 until `citewise calibrate --kb {name}` sets one from "
                         "labelled questions.")
    elif (retrieval or "reader" in changed) and old is not None and before == "default":
        # a policy chosen earlier keeps its default threshold, now for the new settings
        new = replace(new, gate=gate.default_setting(new, old.policy))
    if new.retrieval.rerank and new.reads == "none":
        raise ConfigError("rerank needs the reader, which this knowledge base does not use: set "
                          "reader=auto (or citewise-reader) with it, or leave rerank at 0")
    after = calibration(new)
    if old is not None and before == "calibrated" and after == "stale":
        notes.append(_stale_note(name, old, new))
    elif before == "stale" and after == "calibrated":
        notes.append("The calibrated threshold holds again: the retrieval settings are those it "
                     "was measured with.")
    return Change(new, changed, after, tuple(notes))


__all__ = ["KEYS", "Change", "apply", "calibration", "check_generator", "check_together",
           "check_value", "parse_assignment"]
