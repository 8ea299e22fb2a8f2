"""``uwf-hermes``: the real Hermes agent (``hermes-agent`` on PyPI) as a uwf agent.

    uwf-hermes [hermes chat options…] <thread-id> <role>        (edge prompt in $UWF_EDGE_PROMPT)
    uwf-hermes [hermes chat options…] --thread <id> --role <role> --prompt <text>

Everything before the thread id and role is passed to ``hermes chat`` unchanged, so
``config.yaml`` can choose the model or provider per agent::

    agents: {hermes: {command: uwf-hermes, args: ["-m", "some-model", "--provider", "x"]}}

Hermes runs with the user's own setup (``~/.hermes``, or ``$HERMES_HOME``), non-interactively,
without a shell, stdin closed, in uwf's working directory::

    hermes chat -Q -q <prompt> --source tool [--resume <session> --no-restore-cwd] <options…>

Choices, and why:

- ``-Q`` (quiet): no banner or spinner; Hermes prints the answer and a ``session_id: <id>``
  line. The answer is NOT taken from stdout: the agent reads the session back with
  ``hermes sessions export --session-id <id> -`` and uses the last non-blank assistant
  message of this run, so the raw output, the turns and the model all come from one place.
- ``--source tool``: uwf's sessions stay out of the user's own session list (``hermes sessions
  list --source tool`` shows them); resuming and exporting by id works for any source. A
  ``--source`` among the passed-through options wins (it comes later on the command line).
- ``--no-restore-cwd`` on a resume: Hermes would otherwise move to the directory the session
  was started in; a uwf agent always works in the directory uwf runs in.
- No ``--ignore-rules``: the project's ``AGENTS.md`` and the user's memory and skills are part
  of "the user's own Hermes setup" and usually what a developer role needs. Pass it (or
  ``--safe-mode``, ``--yolo``, ``--max-turns N``…) through the agent's ``args`` to change that.
- Hermes' own retry and timeout settings apply (``agent.api_max_retries``,
  ``providers.<name>.request_timeout_seconds``, ``$HERMES_API_TIMEOUT``); uwf's
  ``--timeout`` / ``agentTimeout`` bounds the whole step and kills Hermes with the agent.

Prompt. A first visit of the role gets the deliverable format, the role
prompt, ``## Task`` and the history (or the moderator's instruction) in a new Hermes session.
A re-entry — the role has spoken before in this thread and the session cache
(``<root>/cache/hermes-sessions.json``, key ``<thread>:<role>``) knows its session — resumes
that session with only the deliverable format and what happened since. When the resumed run
fails for any reason (the session was deleted, the model failed…), one note goes to stderr
and the role starts over in a new session with the full first-visit prompt. A correction
prompt (the output had no valid frontmatter) resumes the step's session too.

Detail. Each assistant or tool message of the step's runs becomes an ``AgentTurn`` node
(``{index, role, content, toolCalls, reasoning}``, the kit's shared turn; user messages are
skipped); the ``HermesDetail`` node is ``{sessionId, model, duration, turnCount, turns}``
with the model Hermes really used and the duration in ms from the start of the step's first
run to its last message. A resumed session also holds the earlier visits' messages: only the
messages written since this process launched Hermes belong to the step. After a correction
the detail returned covers the first run and the corrections.

Failures are one ``error:`` line each (and the head does not move): ``hermes`` not on PATH
(names the package to install), ``hermes chat`` exiting non-zero (quotes what Hermes said:
an HTTP error of the model server, a timeout, "isn't configured yet"…), no session id in its
output, a session export that fails or prints no session, a session without an answer. Hermes'
stderr is passed through to ours, prefixed ``hermes: `` (its ``session_id:`` line excepted).

Modules: ``process`` (running ``hermes``, reading what it said), ``session`` (an exported
session to turns and the answer), ``agent`` (the runs of a step, the detail), ``cli``
(options, help, the console entry).
"""

from uwf.agents.hermes.agent import HermesAgent
from uwf.agents.hermes.cli import chat_options, main, make_parser
from uwf.agents.hermes.process import chat_argv, failure_text, parse_session_id
from uwf.agents.hermes.session import run_of

__all__ = [
    "HermesAgent",
    "chat_argv",
    "chat_options",
    "failure_text",
    "main",
    "make_parser",
    "parse_session_id",
    "run_of",
]
