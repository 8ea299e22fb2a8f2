"""The LLM extract fallback (PORT §7 layer 2, REFERENCE §5.8): an OpenAI-compatible chat
completion in JSON mode turns raw agent output into the role's structured output."""

from __future__ import annotations

import json
from typing import Any

from uwf.util.errors import UwfError

TIMEOUT_S = 60.0  # seconds; $UWF_LLM_TIMEOUT overrides it


def timeout_s() -> float:
    """The HTTP timeout of the extract call: ``$UWF_LLM_TIMEOUT`` seconds, else 60."""
    import os

    try:
        value = float(os.environ.get("UWF_LLM_TIMEOUT", ""))
    except ValueError:
        return TIMEOUT_S
    return value if value > 0 else TIMEOUT_S


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


def chat_json(
    base_url: str, api_key: str, model: str, schema: Any, raw: str, timeout: float = TIMEOUT_S
) -> Any:
    """POST the extract request and return the parsed JSON value of the reply."""
    import httpx

    url = base_url.rstrip("/") + "/chat/completions"
    body = {
        "model": model,
        "messages": [
            {"role": "system", "content": _system_prompt(schema)},
            {"role": "user", "content": raw},
        ],
        "response_format": {"type": "json_object"},
    }
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
    try:
        resp = httpx.post(url, json=body, headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        raise ExtractError(f"LLM request timed out after {timeout:g}s: {url}") from None
    except httpx.HTTPError as exc:
        raise ExtractError(f"LLM network error: {type(exc).__name__}: {exc} ({url})") from None
    if resp.status_code // 100 != 2:
        raise ExtractError(f"LLM HTTP {resp.status_code}: {' '.join(resp.text[:300].split())}")
    try:
        data = resp.json()
    except ValueError:
        raise ExtractError("LLM invalid JSON response: " + resp.text[:200]) from None
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise ExtractError("LLM response has no choices[0].message.content") from None
    if not isinstance(content, str) or not content.strip():
        raise ExtractError("LLM message has no text content")
    try:
        return json.loads(_strip_fence(content))
    except ValueError as exc:
        raise ExtractError(f"failed to parse extracted JSON: {exc}") from None


def extract(root: Any, raw: str, schema_hash: str, store: Any) -> str | None:
    """Run the fallback if a model is configured; the output hash, or None if no model.

    Raises ExtractError when a model is configured but the extraction fails.
    """
    from uwf.config.config import extract_model_alias, load_config, resolve_model
    from uwf.util.errors import InvalidInput, SchemaViolation

    config = load_config(root)
    alias = extract_model_alias(config)
    if alias is None:
        return None
    spec = resolve_model(config, alias)
    schema_node = store.get(schema_hash)
    schema = schema_node.payload if schema_node is not None else {}
    value = chat_json(spec.base_url, spec.api_key, spec.model, schema, raw, timeout_s())
    try:
        return str(store.put(schema_hash, value))
    except (SchemaViolation, InvalidInput) as exc:
        raise ExtractError(f"extracted output failed JSON Schema validation: {exc}") from None
