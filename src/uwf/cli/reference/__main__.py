"""``python -m uwf.cli.reference [--write | --check]``: print the CLI reference, or write or
check the agent kit's copy of it (``agent_kit/cli_reference.md``)."""

import argparse
import sys
from pathlib import Path

from uwf.cli.main import root_command
from uwf.cli.reference import reference_path, render_reference


def live_reference() -> str:
    """The reference of the real ``uwf`` app (its root as ``uwf --help`` shows it)."""
    return render_reference(root_command([]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m uwf.cli.reference",
        description="Print the uwf CLI reference, or write/check the agent kit's copy.",
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help=f"write {reference_path()}")
    action.add_argument(
        "--check", action="store_true", help="exit 1 if the agent kit's copy is out of date"
    )
    args = parser.parse_args(argv)
    text = live_reference()
    target = reference_path()
    if args.write:
        from uwf.util import fsio

        fsio.atomic_write(target, text.encode())
        print(f"wrote {target}")
        return 0
    if args.check:
        current = _read_text(target)
        if current != text:
            print(
                f"{target} is out of date: run python -m uwf.cli.reference --write",
                file=sys.stderr,
            )
            return 1
        return 0
    sys.stdout.write(text)
    return 0


def _read_text(path: Path) -> str | None:
    from uwf.util import fsio

    data = fsio.read_bytes(path)
    return None if data is None else data.decode("utf-8")


if __name__ == "__main__":
    sys.exit(main())
