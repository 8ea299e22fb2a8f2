"""`uwf setup`: configure a model provider, a model and the default agent.

Three ways to run it:

- ``--provider … --model …`` (with ``--base-url`` unless the provider is a preset, and
  ``--api-key`` unless it needs none) runs without prompts and prints one JSON object;
- ``--default-agent NAME`` alone changes only the default agent;
- nothing: it asks on the terminal. Without a terminal (stdin is not a tty) it never
  prompts: the missing answers are an error.

The API key is read with hidden input, written only to ``<root>/.env`` (mode 0600) and never
printed. ``--api-key -`` reads it from the first line of stdin, which keeps it out of the
shell history and the process list. The work is done in ``uwf.engine.local.setup``.
"""

import shutil
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from uwf.engine.local.setup import Preset
    from uwf.util.outputs import SetupDone

from uwf.cli.options import FormatOpt, emit, root
from uwf.util.errors import InvalidInput, UwfError

PARTIAL = "Non-interactive setup requires all of: --provider, --base-url, --api-key, --model"
NO_TERMINAL = (
    "uwf setup asks its questions on a terminal, and stdin is not one: pass --provider, "
    "--base-url, --api-key and --model (or --default-agent NAME alone); see uwf setup --help"
)


ProviderOpt = Annotated[
    str | None,
    typer.Option(
        "--provider",
        help="Provider name, e.g. openai (names the key's env var); a preset name "
        "(openai, ollama, …) also gives the base URL.",
    ),
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option("--base-url", help="OpenAI-compatible API base URL, e.g. https://…/v1."),
]
ApiKeyOpt = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        help="API key, stored in <root>/.env (mode 0600); '-' reads it from stdin. Not "
        "needed for Ollama or a server on this machine.",
        show_default=False,
    ),
]
ModelOpt = Annotated[
    str | None, typer.Option("--model", help="Model id; becomes the model alias 'default'.")
]
DefaultAgentOpt = Annotated[
    str | None,
    typer.Option(
        "--default-agent",
        "--agent",
        help="Default agent: an alias from config.yaml, builtin (uwf-builtin, the "
        "default), hermes (uwf-hermes; must be installed and configured), or a command "
        "added as an alias. Alone, it changes only the default agent.",
    ),
]


def setup(
    provider: ProviderOpt = None,
    base_url: BaseUrlOpt = None,
    api_key: ApiKeyOpt = None,
    model: ModelOpt = None,
    agent: DefaultAgentOpt = None,
    fmt: FormatOpt = None,
) -> None:
    """Configure a provider, a model and the default agent.

    Pass --provider and --model (plus --base-url unless the provider is a preset, and
    --api-key unless it needs none) to run without prompts (prints JSON); pass
    --default-agent alone to change only the default agent; pass nothing to be asked on the
    terminal. Settings are merged into <root>/config.yaml, the key goes to <root>/.env, and
    the model is checked with a one-token request (a failed check does not undo the written
    files, and exits 1). Nothing is written outside the storage root.
    """
    from uwf.engine.local import setup as engine

    if all(v is None for v in (provider, base_url, api_key, model)):
        if agent is not None:
            emit(engine.set_default_agent(root(), agent), fmt)
        elif not sys.stdin.isatty():
            raise InvalidInput(NO_TERMINAL)
        else:
            interactive(agent)
        return
    known = engine.preset(provider)
    if base_url is None and known is not None:
        base_url = known.base_url
    if provider is None or base_url is None or model is None:
        raise InvalidInput(PARTIAL)
    if api_key is None and engine.needs_key(provider, base_url):
        raise InvalidInput(PARTIAL)
    if api_key == "-":
        api_key = sys.stdin.readline().rstrip("\r\n")
    result = engine.run_setup(
        root(),
        provider=provider,
        base_url=base_url,
        api_key=api_key or "",
        model=model,
        agent=agent,
        check=engine.check_model,
    )
    emit(result, fmt)
    _fail_on_check(result)


def _fail_on_check(result: "SetupDone") -> None:
    """Exit 1 when the model did not answer the check (the files stay written)."""
    validation = result["validation"]
    if not validation.get("ok"):
        raise UwfError(
            f"the model check failed: {validation.get('error')} (the configuration was saved; "
            "run uwf setup again to change it)"
        )


# ----------------------------------------------------------------------------- interactive


def provider_menu() -> list[str]:
    """``  <n>) <label padded to 28> <url>`` per preset, then the custom entry."""
    from uwf.engine.local.setup import PRESETS

    width = len(str(len(PRESETS) + 1))
    lines = [f"  {i:>{width}}) {p.label:<28} {p.base_url}" for i, p in enumerate(PRESETS, 1)]
    lines.append(f"  {len(PRESETS) + 1:>{width}}) Custom (enter name and URL manually)")
    return lines


def choose_provider(choice: str) -> "Preset | None":
    """A preset for ``1..N``; None for the custom entry ``N+1``; else ``Invalid choice``."""
    from uwf.engine.local.setup import PRESETS

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
    return str(typer.prompt(text, default="", show_default=False, hide_input=True))


Ask = Callable[[str], str]
Say = Callable[[str], None]


def _ask_provider(ask: Ask, say: Say) -> tuple[str, str]:
    """(provider name, base URL): a preset from the menu, or a custom one."""
    from uwf.engine.local.setup import PRESETS

    say("Select a provider:")
    for line in provider_menu():
        say(line)
    say("")
    while True:  # a typo asks again
        answer = ask(f"Choose [1-{len(PRESETS) + 1}]")
        try:
            preset = choose_provider(answer)
        except InvalidInput as exc:
            say(f"{exc.message}: type a number from 1 to {len(PRESETS) + 1}")
            continue
        break
    if preset is not None:
        say(f"  → {preset.label} ({preset.base_url})")
        return preset.name, preset.base_url
    provider = ask("Provider name (e.g. my-proxy)").strip()
    if not provider:
        raise InvalidInput("Provider name required")
    base_url = ask("OpenAI-compatible API base URL").strip()
    if not base_url:
        raise InvalidInput("Base URL required")
    return provider, base_url


def _ask_key(provider: str, base_url: str, ask_secret: Ask, say: Say) -> str:
    """The API key; none is asked of a keyless preset, and one may be left empty for a server
    on this machine."""
    from uwf.engine.local.setup import needs_key, preset

    known = preset(provider)
    if known is not None and not known.needs_key:
        say("  (no API key needed)")
        return ""
    if not needs_key(provider, base_url):
        return ask_secret("API key (leave empty if the server needs none)").strip()
    api_key = ask_secret("API key").strip()
    if not api_key:
        raise InvalidInput("API key required")
    return api_key


def _ask_model(base_url: str, api_key: str, ask: Ask, say: Say) -> str:
    from uwf.engine.local.setup import fetch_models

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
    return model


def interactive(
    agent: str | None,
    ask: Ask = _ask,
    ask_secret: Ask = _ask_secret,
    say: Say = typer.echo,
) -> None:
    """Ask for provider, key and model, then run the same setup as the flags do."""
    from uwf.engine.local.setup import check_model, run_setup

    say("Welcome to uwf setup: configure an OpenAI-compatible model provider.")
    say("")
    provider, base_url = _ask_provider(ask, say)
    api_key = _ask_key(provider, base_url, ask_secret, say)
    model = _ask_model(base_url, api_key, ask, say)
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
    _summary(result, say)
    _fail_on_check(result)


def _summary(result: "SetupDone", say: Say) -> None:
    say("")
    validation = result["validation"]
    if validation.get("ok"):
        say(f"✓ Model {result['provider']}/{result['model']} responded.")
    else:
        say(f"⚠ Warning: Could not reach model — {validation.get('error')}")
        say("  The configuration was saved anyway; run `uwf setup` again to change it.")
    say(f"Config:  {result['configPath']}")
    env = result["envPath"]
    say(f"API key: {env} (mode 0600)" if env else "API key: none (the server needs none)")
    say(f"Default agent: {result['defaultAgent']}")
    say("")
    say("Setup complete! Get started:")
    say("  uwf workflow put my-workflow.yaml")
    say('  uwf thread start my-workflow -p "Describe the task"')
    say("  uwf thread step <thread-id>")
