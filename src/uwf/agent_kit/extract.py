"""The LLM extract fallback (docs/agents.md): an OpenAI-compatible chat completion in JSON
mode turns raw agent output into the role's structured output.

The call goes through ``uwf.adapters.llm`` (timeout: ``$UWF_LLM_TIMEOUT``, else 60 s; no
retries); its failures are the adapter's ``LLM …`` lines, the extract's own are below."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from uwf.util.errors import UwfError

if TYPE_CHECKING:
    from pathlib import Path

    from uwf.adapters.llm import Client
    from uwf.cas.store import Store


class ExtractError(UwfError):
    """The extract model could not produce a valid output."""


def _system_prompt(schema: Any) -> str:
    return (
        "Extract structured data from the user's message. Reply with a single JSON object "
        "only, no prose and no code fence, that validates against this JSON Schema:\n"
        + json.dumps(schema, indent=2, ensure_ascii=False)
    )


def _strip_fence(text: str) -> str:
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        if body.rstrip().endswith("```"):
            body = body.rstrip()[:-3]
    return body.strip()


def extract_json(client: Client, schema: Any, raw: str) -> Any:
    """Ask the model in JSON mode; the parsed JSON value of its reply."""
    reply = client.chat(
        [
            {"role": "system", "content": _system_prompt(schema)},
            {"role": "user", "content": raw},
        ],
        response_format={"type": "json_object"},
    )
    if not reply.text.strip():
        raise ExtractError("LLM message has no text content")
    try:
        return json.loads(_strip_fence(reply.text))
    except ValueError as exc:
        raise ExtractError(f"failed to parse extracted JSON: {exc}") from None


def extract(
    root: Path,
    raw: str,
    schema_hash: str,
    store: Store,
    on_reply: Callable[[Any], None] | None = None,
) -> str | None:
    """Run the fallback if a model is configured; the output hash, or None if no model.
    ``on_reply`` sees the model's reply (the kit counts its tokens).

    Raises ExtractError when a model is configured but the extraction fails.
    """
    from uwf.adapters import llm
    from uwf.config.config import extract_model_alias, load_config, resolve_model
    from uwf.util.errors import InvalidInput, SchemaViolation

    config = load_config(root)
    alias = extract_model_alias(config)
    if alias is None:
        return None
    spec = resolve_model(config, alias)
    schema_node = store.get(schema_hash)
    schema = schema_node.payload if schema_node is not None else {}
    client = llm.Client(
        spec.base_url,
        spec.api_key,
        spec.model,
        timeout=llm.resolve_timeout(llm.EXTRACT_TIMEOUT),
        on_reply=on_reply,
    )
    try:
        value = extract_json(client, schema, raw)
    finally:
        client.close()
    try:
        return str(store.put(schema_hash, value))
    except (SchemaViolation, InvalidInput) as exc:
        raise ExtractError(f"extracted output failed JSON Schema validation: {exc}") from None
