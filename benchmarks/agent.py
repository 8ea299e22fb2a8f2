"""The small agent program of the external-agent rows: the same one on every side.

    python benchmarks/agent.py < prompt

It reads its whole prompt from stdin, as a command-line agent does, and prints the answer
``workload.py`` gives for its step: YAML frontmatter and a markdown body. Which step: the
peers' nodes say it in ``BENCH_TASK``, ``BENCH_ROLE`` and ``BENCH_STEP``; under ``uwf-cmd``
the role is ``UWF_ROLE`` and the task and step number are read from the prompt uwf-cmd
composes (its ``## Task`` section, and the number of the newest ``### Step N`` it shows).
Standard library only, and nothing else: a model would take seconds here.
"""

from __future__ import annotations

import os
import re
import sys

import workload


def which(prompt: str) -> tuple[str, str, int]:
    """(task, role, step) of this run."""
    if "BENCH_STEP" in os.environ:
        return os.environ["BENCH_TASK"], os.environ["BENCH_ROLE"], int(os.environ["BENCH_STEP"])
    task = prompt.split("## Task\n", 1)[1].split("\n", 1)[0]
    shown = [int(n) for n in re.findall(r"^### Step (\d+):", prompt, re.MULTILINE)]
    return task, os.environ["UWF_ROLE"], max(shown, default=0) + 1


def main() -> None:
    prompt = sys.stdin.read()
    sys.stdout.write(workload.answer(*which(prompt)))


if __name__ == "__main__":
    main()
