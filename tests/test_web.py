"""The web view without a browser: pages, escaping, export, headers, errors (tests/test_browser.py
drives the same pages in Chromium).

Hostile text goes through real steps: uwf-mock outputs with ``<script>``, ``</textarea>``,
``{{ }}``, HTML entities, an ``onerror`` image and a ``javascript:`` link; a task with markup.
"""

from __future__ import annotations

import importlib.util
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from support import APPROVE, BIN, DEV, PLAN, REJECT
from uwf.backend.fs import FsBackend
from uwf.web.app import ThreadStream, create_app

HOSTILE = (
    "---\nstatus: _\nfilesChanged: [a.py]\nsummary: s\n---\n"
    "Done <script>alert(1)</script> and </textarea><b>bold</b> {{ secret }} "
    '&amp; &lt;x&gt; <img src=x onerror="window.__xss=1"> [click](javascript:alert(1))'
)
TASK = "Fix <script>alert('task')</script> & {{ braces }}"


@pytest.fixture
def hostile(cli: Any, solve_issue: str, scenario: Any) -> str:
    """A thread whose developer step printed every kind of markup; three steps done."""
    thread = cli("thread", "start", "solve-issue", "-p", TASK).json()["thread"]
    agent = scenario({"planner": [PLAN], "developer": [HOSTILE], "reviewer": [REJECT, APPROVE]})
    assert cli("thread", "step", thread, "-c", "3", "--agent", agent).code == 0
    return str(thread)


@pytest.fixture
def client(root: Path) -> TestClient:
    return TestClient(create_app(FsBackend(root)), base_url="http://127.0.0.1")


def check_escaped(html: str) -> None:
    assert "<script>alert" not in html and "<b>bold</b>" not in html
    assert "<img" not in html and 'href="javascript:' not in html
    assert "</textarea>" not in html
    assert "Done &lt;script&gt;alert(1)&lt;/script&gt; and &lt;/textarea&gt;&lt;b&gt;bold" in html
    assert "{{ secret }}" in html  # shown as typed, never evaluated
    # Markdown reads entity references as the characters they name: "& <x>", as text.
    assert "{{ secret }} &amp; &lt;x&gt; &lt;img" in html
    assert "Fix &lt;script&gt;alert('task')&lt;/script&gt; &amp; {{ braces }}" in html


def test_thread_page_escapes_agent_output(client: TestClient, hostile: str) -> None:
    page = client.get(f"/thread/{hostile}")
    assert page.status_code == 200
    check_escaped(page.text)
    scripts = re.findall(r"<script[^>]*>", page.text)
    assert scripts == ['<script src="/static/uwf.js" defer>']
    assert page.text.count('<section class="step"') == 3
    assert '<g class="node role current" data-node="developer">' in page.text
    assert "Review this change." in page.text  # the edge prompt of step 3
    csp = page.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp


def test_step_detail_fragment(client: TestClient, hostile: str, cli: Any) -> None:
    steps = cli("thread", "steps", hostile).json()["steps"]
    fragment = client.get(f"/step/{steps[2]['hash']}/detail")
    assert fragment.status_code == 200
    assert "turn 1 · assistant" in fragment.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in fragment.text
    assert "&amp;amp; &amp;lt;x&amp;gt;" in fragment.text  # raw turns: exactly as written
    assert "<script" not in fragment.text
    assert client.get("/step/nothash/detail").status_code == 400


def test_export_is_self_contained(cli: Any, hostile: str, tmp_path: Path) -> None:
    target = tmp_path / "thread.html"
    result = cli("thread", "export", hostile, "--html", str(target))
    assert result.code == 0, result.err
    html = target.read_text(encoding="utf-8")
    assert result.json() == {"thread": hostile, "file": str(target), "bytes": len(html.encode())}
    check_escaped(html)
    assert "<script" not in html
    assert "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\"" in html
    assert not re.search(r"""(src|href)=["']?(https?:|//|/)""", html)
    assert "svg.uwf-graph" in html  # the stylesheet is inline
    assert html.count('<section class="step"') == 3
    assert html.count('<details class="detail">') == 3  # every detail inline
    assert "turn 1 · assistant" in html
    stdout = cli("thread", "export", hostile, "--html", "-")
    assert stdout.out.count('<section class="step"') == 3


def test_thread_list_and_filters(client: TestClient, cli: Any, new_thread: Any) -> None:
    active = new_thread("one")
    done = new_thread("two")
    assert cli("thread", "kill", done).code == 0
    page = client.get("/").text
    assert active in page and done not in page
    every = client.get("/?all=1").text
    assert active in every and done in every and '<span class="badge killed">' in every
    killed = client.get("/?status=killed").text
    assert done in killed and active not in killed
    rows = client.get("/fragment/threads?status=killed").text
    assert rows.count('<tr class="thread"') == 1
    bad = client.get("/?status=bogus")
    assert bad.status_code == 400
    assert "Invalid status: bogus. Must be one of:" in bad.text
    assert client.get("/?take=x").status_code == 400


def test_workflow_page(client: TestClient, solve_issue: str) -> None:
    for ident in ("solve-issue", solve_issue):
        page = client.get(f"/workflow/{ident}")
        assert page.status_code == 200
        assert page.text.count('<section class="role"') == 3
        assert '<svg class="uwf-graph"' in page.text
        assert f'<a href="/workflow/{solve_issue}"><code>{solve_issue}</code></a>' in page.text
        assert "flowchart TD" in page.text  # the Mermaid text to paste
        assert "&#34;enum&#34;" in page.text or "&quot;enum&quot;" in page.text
    assert client.get("/workflow/nope").status_code == 404


def test_read_only_and_not_found(client: TestClient, hostile: str) -> None:
    assert client.post(f"/thread/{hostile}").status_code == 405
    assert client.get("/thread/01ARZ3NDEKTSV4RRFFQ69G5FAV").status_code == 404
    missing = client.get("/thread/<script>")
    assert missing.status_code == 400 and "<script>" not in missing.text
    assert client.get("/static/uwf.css").status_code == 200
    assert client.get("/static/../pages.py").status_code == 404


def test_thread_stream_sends_rendered_steps(
    cli: Any, new_thread: Any, scenario: Any, root: Path
) -> None:
    thread = new_thread()
    head = cli("thread", "show", thread).json()["head"]
    stream = ThreadStream(FsBackend(root), thread, head)
    assert stream.poll() == []
    agent = scenario({"planner": [PLAN], "developer": [HOSTILE]})
    assert cli("thread", "step", thread, "-c", "2", "--agent", agent).code == 0
    events = stream.poll()
    assert [name for name, _ in events] == ["step.completed", "step.completed"]
    second = events[1][1]
    assert second["number"] == 2 and second["status"] == "idle"
    assert 'id="step-2"' in second["html"] and "<script>alert" not in second["html"]
    assert '<g class="node role current" data-node="reviewer">' in second["graph"]
    assert cli("thread", "kill", thread).code == 0
    [(name, data)] = stream.poll()
    assert name == "thread.archived" and data["status"] == "killed"
    assert stream.done


def test_missing_extra_is_one_line(
    cli: Any, monkeypatch: pytest.MonkeyPatch, new_thread: Any
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "starlette" else real(name, *a),
    )
    message = "error: the web view needs the ui extra (starlette missing): pip install 'uwf[ui]'\n"
    assert cli("ui").err == message
    assert cli("thread", "export", new_thread(), "--html", "x.html").err == message


def test_ui_binds_loopback_and_warns_for_other_hosts(root: Path) -> None:
    def start(*args: str) -> tuple[subprocess.Popen[str], str]:
        proc = subprocess.Popen(
            [str(BIN / "uwf"), "ui", "--port", "0", *args],
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None
        return proc, proc.stderr.readline()

    proc, line = start()
    try:
        served = rf"uwf ui: serving {re.escape(str(root))} at http://127\.0\.0\.1:\d+/ "
        assert re.fullmatch(served + r"\(Ctrl-C stops\)\n", line)
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=30).status_code == 200
        busy = subprocess.run(
            [str(BIN / "uwf"), "ui", "--port", str(port)], capture_output=True, text=True
        )
        assert busy.returncode == 1
        assert busy.stderr.startswith(f"error: cannot listen on 127.0.0.1:{port}: ")
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: a clean stop, nothing more printed
        assert proc.wait(timeout=30) == 0
        assert proc.stderr is not None and proc.stderr.read() == ""
        proc.stderr.close()
    proc, line = start("--host", "0.0.0.0")
    try:
        assert line == (
            "warning: uwf ui listens on 0.0.0.0: anyone who can reach it can read every thread "
            "(read-only, no authentication)\n"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        assert proc.stderr is not None
        proc.stderr.close()


def test_ui_help_names_the_extra() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "uwf.cli.main", "ui", "--help"], capture_output=True, text=True
    )
    assert "pip install 'uwf[ui]'" in " ".join(out.stdout.split())
    assert DEV  # the fixtures above step real threads with these outputs
