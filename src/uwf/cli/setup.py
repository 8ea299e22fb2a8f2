"""`uwf setup`: configure a model provider, a model and the default agent.

With all four of ``--provider --base-url --api-key --model`` it runs non-interactively and
prints one JSON object; with none of them it asks on the terminal (REFERENCE §7.4); any other
combination is refused. The HTTP calls (model check, model listing) live here because the
engine layer may not import httpx; the engine gets the check as a callable.

The API key is read with hidden input, written only to ``<root>/.env`` (mode 0600) and never
printed. ``--api-key -`` reads it from the first line of stdin, which keeps it out of the
shell history and the process list.
"""

import shutil
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from uwf.engine.setup import Preset

from uwf.cli.options import FormatOpt, emit, root
from uwf.util.errors import InvalidInput

CHECK_TIMEOUT = 15.0
LIST_TIMEOUT = 10.0
PARTIAL = "Non-interactive setup requires all of: --provider, --base-url, --api-key, --model"


def setup(
    provider: Annotated[
        str | None,
        typer.Option("--provider", help="Provider name, e.g. openai (names the key's env var)."),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option("--base-url", help="OpenAI-compatible API base URL, e.g. https://…/v1."),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            help="API key, stored in <root>/.env (mode 0600); '-' reads it from stdin.",
            show_default=False,
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Model id; becomes the model alias 'default'.")
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            help="Default agent: an alias from config.yaml, or a command added as an alias.",
        ),
    ] = None,
    fmt: FormatOpt = None,
) -> None:
    """Configure a provider, a model and the default agent.

    Pass all of --provider, --base-url, --api-key and --model to run without prompts (prints
    JSON); pass none of them to be asked interactively. Settings are merged into
    <root>/config.yaml, the key goes to <root>/.env, and the model is checked with a one-token
    request (a failed check does not undo the written files).
    """
    from uwf.engine.setup import run_setup

    given = [v is not None for v in (provider, base_url, api_key, model)]
    if not any(given):
        interactive(agent)
        return
    if not all(given):
        raise InvalidInput(PARTIAL)
    assert provider is not None and base_url is not None and model is not None
    assert api_key is not None
    if api_key == "-":
        api_key = sys.stdin.readline().rstrip("\r\n")
    result = run_setup(
        root(),
        provider=provider,
        base_url=base_url,
        api_key=api_key,
        model=model,
        agent=agent,
        check=check_model,
    )
    emit(result, fmt)


# ------------------------------------------------------------------------------------ HTTP


def check_model(
    base_url: str, api_key: str, model: str, timeout: float = CHECK_TIMEOUT
) -> dict[str, Any]:
    """POST a one-token chat completion; ``{"ok": True}`` on 2xx, else ``ok: false`` + error."""
    import httpx

    url = base_url.rstrip("/") + "/chat/completions"
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
    try:
        response = httpx.post(url, json=body, headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        return {
            "ok": False,
            "error": f"Request timed out after {timeout:g}s — the endpoint is unreachable "
            f"or not responding ({url})",
        }
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return {"ok": False, "error": f"Network error — could not reach endpoint ({exc})"}
    if response.is_success:
        return {"ok": True}
    return {"ok": False, "error": f"HTTP {response.status_code} {response.reason_phrase}".strip()}


def fetch_models(base_url: str, api_key: str, timeout: float = LIST_TIMEOUT) -> list[str]:
    """The provider's chat model ids from ``GET <base>/models``; any failure -> ``[]``."""
    import httpx

    from uwf.engine.setup import chat_models

    try:
        response = httpx.get(
            base_url.rstrip("/") + "/models",
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout,
        )
        response.raise_for_status()
        data = response.json().get("data")
    except (httpx.HTTPError, httpx.InvalidURL, ValueError, AttributeError):
        return []
    if not isinstance(data, list):
        return []
    return chat_models([str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")])


# ----------------------------------------------------------------------------- interactive


def provider_menu() -> list[str]:
    """``  <n>) <label padded to 28> <url>`` per preset, then the custom entry."""
    from uwf.engine.setup import PRESETS

    width = len(str(len(PRESETS) + 1))
    lines = [f"  {i:>{width}}) {p.label:<28} {p.base_url}" for i, p in enumerate(PRESETS, 1)]
    lines.append(f"  {len(PRESETS) + 1:>{width}}) Custom (enter name and URL manually)")
    return lines


def choose_provider(choice: str) -> "Preset | None":
    """A preset for ``1..N``; None for the custom entry ``N+1``; else ``Invalid choice``."""
    from uwf.engine.setup import PRESETS

    text = choice.strip()
    if text.isdigit() and 1 <= int(text) <= len(PRESETS) + 1:
        n = int(text)
        return PRESETS[n - 1] if n <= len(PRESETS) else None
    raise InvalidInput(f"Invalid choice: {choice}")


def model_menu(models: list[str], columns: int) -> list[str]:
    """A column-major numbered menu that fits ``columns`` terminal columns."""
    if not models:
        return []
    num_width = len(str(len(models)))
    cell = num_width + 2 + max(len(m) for m in models) + 4
    ncols = max(1, columns // cell)
    nrows = -(-len(models) // ncols)
    lines = []
    for row in range(nrows):
        cells = []
        for col in range(ncols):
            i = col * nrows + row
            if i < len(models):
                cells.append(f"{i + 1:>{num_width}}) {models[i]}".ljust(cell))
        lines.append(("  " + "".join(cells)).rstrip())
    return lines


def choose_model(choice: str, models: list[str]) -> str:
    """An in-range number picks from the menu; anything else is a literal model id."""
    text = choice.strip()
    if text.isdigit() and 1 <= int(text) <= len(models):
        return models[int(text) - 1]
    return text


def _ask(text: str) -> str:
    return str(typer.prompt(text, default="", show_default=False))


def _ask_secret(text: str) -> str:
    # Hidden input on a terminal; piped stdin is read as is (nothing is echoed either way).
    hide = sys.stdin.isatty()
    return str(typer.prompt(text, default="", show_default=False, hide_input=hide))


def interactive(
    agent: str | None,
    ask: Callable[[str], str] = _ask,
    ask_secret: Callable[[str], str] = _ask_secret,
    say: Callable[[str], None] = typer.echo,
) -> None:
    """Ask for provider, key and model, then run the same setup as the flags do."""
    from uwf.engine.setup import PRESETS, run_setup

    say("Welcome to uwf setup: configure an OpenAI-compatible model provider.")
    say("")
    say("Select a provider:")
    for line in provider_menu():
        say(line)
    say("")
    preset = choose_provider(ask(f"Choose [1-{len(PRESETS) + 1}]"))
    if preset is not None:
        provider, base_url = preset.name, preset.base_url
        say(f"  → {preset.label} ({preset.base_url})")
    else:
        provider = ask("Provider name (e.g. my-proxy)").strip()
        if not provider:
            raise InvalidInput("Provider name required")
        base_url = ask("OpenAI-compatible API base URL").strip()
        if not base_url:
            raise InvalidInput("Base URL required")
    api_key = ask_secret("API key").strip()
    if not api_key:
        raise InvalidInput("API key required")

    say("Fetching available models...")
    models = fetch_models(base_url, api_key)
    if not models:
        say("Could not fetch models. Enter model name manually.")
        model = ask("Default model (e.g. qwen-plus, gpt-4o)").strip()
    else:
        say(f"Available models ({len(models)}):")
        for line in model_menu(models, shutil.get_terminal_size((100, 24)).columns):
            say(line)
        say("Type a number from the list, or any model name.")
        model = choose_model(ask(f"Default model [1-{len(models)}]"), models)
    if not model:
        raise InvalidInput("Model required")
    say(f"  → {provider}/{model}")

    result = run_setup(
        root(),
        provider=provider,
        base_url=base_url,
        api_key=api_key,
        model=model,
        agent=agent,
        check=check_model,
    )
    say("")
    validation = result["validation"]
    if validation.get("ok"):
        say(f"✓ Model {provider}/{model} responded.")
    else:
        say(f"⚠ Warning: Could not reach model — {validation.get('error')}")
        say("  The configuration was saved anyway; run `uwf setup` again to change it.")
    say(f"Config:  {result['configPath']}")
    say(f"API key: {result['envPath']} (mode 0600)")
    say(f"Default agent: {result['defaultAgent']}")
    say("")
    say("Setup complete! Get started:")
    say("  uwf workflow put my-workflow.yaml")
    say('  uwf thread start my-workflow -p "Describe the task"')
    say("  uwf thread step <thread-id>")
