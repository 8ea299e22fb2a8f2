"""The web view in a real browser: Debian's headless Chromium, driven by Playwright.

`uwf ui` runs as a subprocess on a free loopback port; steps run from other processes with
`uwf-mock`. Playwright never downloads a browser: it launches /usr/bin/chromium (scripts/test.sh
installs it where missing). Screenshots go to test-artifacts/ (ignored by git). The Mermaid text
of `uwf workflow graph`/`thread graph` is rendered with the real Mermaid, fetched from the npm
registry at a pinned version and sha256 by scripts/fetch-mermaid.sh.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import version1 as v1
from llm_server import llm_fixture  # noqa: F401
from support import APPROVE, BIN, DEV, PLAN, REJECT, REPO

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = REPO / "test-artifacts"
MERMAID = REPO / ".cache" / "mermaid" / "mermaid-12.3.0.min.js"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HOSTILE = (
    "---\nstatus: _\nfilesChanged: [a.py]\nsummary: s\n---\n"
    "Done <script>window.__xss = 1</script> </textarea><b>bold</b> {{ secret }} &amp; "
    '<img src=x onerror="window.__xss = 2"> [click](javascript:window.__xss=3)'
)
VISIBLE = "Done <script>window.__xss = 1</script> </textarea><b>bold</b> {{ secret }} &"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), "no /usr/bin/chromium: scripts/test.sh installs it (apt-get)"
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            args=FLAGS,
            viewport={"width": 1100, "height": 900},
        )
        yield context
        context.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    page = browser.new_page()
    page.set_default_timeout(20_000)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.requests = requests
    yield page
    page.close()


@pytest.fixture
def server(root: Path) -> Iterator[str]:
    """`uwf ui --port 0` on this test's storage root; its base URL."""
    root.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [str(BIN / "uwf"), "ui", "--port", "0"], stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    found = re.search(r"at (http://127\.0\.0\.1:\d+/) ", line)
    assert found, line
    yield found.group(1)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0
    proc.stderr.close()


def step(thread: str, agent: str, count: int = 1) -> None:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    subprocess.run(
        [str(BIN / "uwf"), "thread", "step", thread, "-c", str(count), "--agent", agent],
        env=env,
        check=True,
        capture_output=True,
    )


def only_local(requests: list[str], base: str) -> None:
    outside = [u for u in requests if not u.startswith((base, "data:"))]
    assert outside == [], outside


def test_thread_list_shows_the_threads(page: Any, server: str, new_thread: Any, cli: Any) -> None:
    threads = [new_thread("first"), new_thread("second")]
    cli("thread", "kill", threads[1])
    page.goto(server)
    assert page.locator("tr.thread").count() == 1
    page.check("input[name=all]")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"all=1"))
    rows = page.locator("tr.thread")
    assert sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.thread)")) == sorted(threads)
    assert page.locator("tr.thread .badge.killed").count() == 1
    third = new_thread("third")  # a thread started elsewhere appears without a reload
    page.wait_for_selector(f'tr.thread[data-thread="{third}"]')
    only_local(page.requests, server)


def test_a_step_appears_live_and_the_graph_marks_the_current_role(
    page: Any, server: str, new_thread: Any, scenario: Any
) -> None:
    thread = new_thread("Validate the e-mail field of the signup form")
    agent = scenario(
        {"planner": [PLAN], "developer": [DEV], "reviewer": [REJECT, APPROVE]}, inprocess=False
    )
    step(thread, agent, 2)
    page.goto(f"{server}thread/{thread}")
    page.evaluate("window.__sameDocument = true")
    assert page.locator("section.step").count() == 2
    current = page.locator("svg.uwf-graph g.node.current")
    assert current.get_attribute("data-node") == "reviewer"

    slow = scenario({"reviewer": [{"output": REJECT, "sleep": 1.5}]}, inprocess=False)
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    other = subprocess.Popen(
        [str(BIN / "uwf"), "thread", "step", thread, "--agent", slow],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    page.wait_for_selector("#running:not([hidden])")
    assert page.locator("#running").inner_text() == "step 3 running: reviewer (uwf-mock)"
    assert other.wait(timeout=60) == 0
    page.wait_for_selector("#step-3")
    assert page.evaluate("window.__sameDocument") is True  # no reload happened
    assert page.locator("#step-3 h2").inner_text() == "Step 3: reviewer rejected"
    page.wait_for_selector('svg.uwf-graph g.node.current[data-node="developer"]')
    assert page.locator("svg.uwf-graph g.edge.taken").count() == 3
    assert (
        page.locator("svg.uwf-graph g.edge.next").get_attribute("data-edge") == "reviewer rejected"
    )
    assert page.locator("#status").inner_text() == "idle"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "thread-page.png"), full_page=True)

    step(thread, agent, 5)  # to $END: the page shows the end
    page.wait_for_selector("#status.completed")
    page.wait_for_selector('svg.uwf-graph g.node.current[data-node="$END"]')
    assert page.locator("section.step").count() == 5
    only_local(page.requests, server)


def test_agent_html_renders_as_text(
    page: Any, server: str, new_thread: Any, scenario: Any, cli: Any, tmp_path: Path
) -> None:
    thread = new_thread("Task with <i>markup</i> & {{ braces }}")
    step(thread, scenario({"planner": [PLAN], "developer": [HOSTILE]}, inprocess=False), 2)
    page.goto(f"{server}thread/{thread}")
    check_text(page)
    page.click("#step-2 details.detail summary")  # detail and turns, loaded on demand
    page.wait_for_selector("#step-2 details.detail .turn")
    turn = page.locator("#step-2 details.detail .turn pre").first.inner_text()
    assert turn == HOSTILE
    assert page.evaluate("window.__xss") is None

    target = tmp_path / "export.html"
    assert cli("thread", "export", thread, "--html", str(target)).code == 0
    page.goto(target.as_uri())
    check_text(page)


def check_text(page: Any) -> None:
    output = page.locator("#step-2 .output").inner_text()
    assert output.startswith(VISIBLE)
    assert (
        page.locator("#step-2 .output b, #step-2 .output img, #step-2 .output script").count() == 0
    )
    link = page.locator("#step-2 .output a")
    assert link.count() == 0 or not (link.get_attribute("href") or "").startswith("javascript:")
    assert page.locator(".task").inner_text().endswith("Task with <i>markup</i> & {{ braces }}")
    assert page.evaluate("window.__xss") is None


def test_exported_file_opens_with_no_network(
    browser: Any, new_thread: Any, scenario: Any, cli: Any, tmp_path: Path
) -> None:
    thread = new_thread()
    step(thread, scenario(), 3)
    target = tmp_path / "thread.html"
    assert cli("thread", "export", thread, "--html", str(target)).code == 0
    browser.set_offline(True)
    page = browser.new_page()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    try:
        page.goto(target.as_uri())
        assert requests == [target.as_uri()]
        assert page.locator("section.step").count() == 3
        assert page.locator('svg.uwf-graph g.node.current[data-node="developer"]').count() == 1
        page.click("#step-3 details.detail summary")
        assert "Needs tests." in page.locator("#step-3 details.detail").inner_text()
        width = page.evaluate(
            "document.querySelector('svg.uwf-graph').getBoundingClientRect().width"
        )
        assert width > 100  # the inline stylesheet applied and the graph has its size
    finally:
        page.close()
        browser.set_offline(False)


def test_mermaid_text_renders_in_mermaid(
    page: Any, cli: Any, new_thread: Any, scenario: Any
) -> None:
    """The Mermaid text GitHub would render, rendered by the real Mermaid."""
    if not MERMAID.exists():
        subprocess.run(["bash", str(REPO / "scripts" / "fetch-mermaid.sh")], check=True)
    thread = new_thread()
    step(thread, scenario(), 3)
    texts = {
        "workflow": cli("workflow", "graph", "solve-issue").out,
        "thread": cli("thread", "graph", thread).out,
    }
    page.set_content("<html><body></body></html>")
    page.add_script_tag(path=str(MERMAID))
    page.evaluate("mermaid.initialize({startOnLoad: false, securityLevel: 'strict'})")
    for name, text in texts.items():
        svg = page.evaluate("async t => (await mermaid.render('g' + Date.now(), t)).svg", text)
        page.evaluate("s => { document.body.innerHTML = s; }", svg)
        nodes = page.locator("svg g.node").evaluate_all("ns => ns.map(n => n.textContent.trim())")
        assert sorted(nodes) == sorted(["$START", "planner", "developer", "reviewer", "$END"])
        labels = page.locator("svg .edgeLabel").evaluate_all("ls => ls.map(l => l.textContent)")
        assert "rejected" in labels and "approved" in labels, (name, labels)
        if name == "thread":
            assert "_ ×1" in labels
            current = page.locator("svg g.node.current").text_content() or ""
            assert current.strip() == "developer"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "thread-graph-mermaid.png"))


def body_font(page: Any) -> str:
    return str(page.evaluate("getComputedStyle(document.body).fontFamily"))


def test_the_export_looks_like_the_live_page(
    page: Any, server: str, new_thread: Any, scenario: Any, cli: Any, tmp_path: Path
) -> None:
    """The inlined CSS is applied: the body's computed font is the stylesheet's in both, not
    the browser's default serif (the CSS used to be HTML-escaped inside <style>)."""
    thread = new_thread()
    step(thread, scenario(), 2)
    page.goto(f"{server}thread/{thread}")
    live = body_font(page)
    assert "Segoe UI" in live and "system-ui" in live
    target = tmp_path / "thread.html"
    assert cli("thread", "export", thread, "--html", str(target)).code == 0
    page.goto(target.as_uri())
    assert body_font(page) == live
    border = "getComputedStyle(document.querySelector('section.step')).borderTopStyle"
    assert page.evaluate(border) == "solid"


def test_failing_and_waiting_threads_say_why(
    page: Any, server: str, new_thread: Any, scenario: Any
) -> None:
    failing, waiting = new_thread("Fails at once"), new_thread("Waits for a person")
    with pytest.raises(subprocess.CalledProcessError):
        step(
            failing,
            scenario({"planner": [{"exit": 1, "stderr": "error: rate limited"}]}, inprocess=False),
        )
    step(waiting, scenario({"planner": [PLAN], "developer": [DEV]}, inprocess=False), 2)
    deferring = scenario(
        {"reviewer": [{"exit": 75, "stderr": "error: no terminal"}]}, inprocess=False
    )
    proc = subprocess.run(
        [str(BIN / "uwf"), "thread", "step", waiting, "--agent", deferring],
        capture_output=True,
        env=dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}"),
    )
    assert proc.returncode == 6, proc.stderr
    page.goto(server)
    rows = {
        row["thread"]: row
        for row in page.locator("tr.thread").evaluate_all(
            "rs => rs.map(r => ({thread: r.dataset.thread, text: r.innerText}))"
        )
    }
    assert "Fails at once" in rows[failing]["text"] and "failing" in rows[failing]["text"]
    assert "Waits for a person" in rows[waiting]["text"] and "for reviewer" in rows[waiting]["text"]
    page.goto(f"{server}thread/{failing}")
    assert page.locator("#status").inner_text() == "failing"
    said = page.locator("#failure").inner_text()
    assert "The last attempt to step it failed (planner, agent uwf-mock)" in said
    assert "exit 5" in said and "error: rate limited" in said
    page.goto(f"{server}thread/{waiting}")
    said = page.locator("#waiting").inner_text()
    assert "Waits for reviewer since " in said and ": no terminal." in said
    assert f'uwf thread answer {waiting} --status approved|rejected --set comments=… -m "…"' in said


# -- hostile agents (docs/reliability.md, "Hostile agents") ---------------------------------


@pytest.fixture
def pixel() -> Iterator[Any]:
    """A server on loopback that counts every request: where a remote image would come from."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    httpd.hits = hits  # type: ignore[attr-defined]
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}/pixel.png"  # type: ignore[attr-defined]
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_a_remote_image_is_a_plain_link_and_never_fetched(
    page: Any, server: str, new_thread: Any, scenario: Any, cli: Any, pixel: Any, tmp_path: Path
) -> None:
    """The page and the export show `![alt](http://…)` as a link; Chromium makes no request
    for it, from the page, the export, or the export with its CSP taken out."""
    thread = new_thread()
    output = f"---\nstatus: _\nplan: p\nsteps: [a]\n---\nLook: ![the pixel]({pixel.url}) here"
    step(thread, scenario({"planner": [output]}))
    page.goto(f"{server}thread/{thread}")
    link = page.locator("#step-1 .output a.image-link")
    assert link.inner_text() == "the pixel" and link.get_attribute("href") == pixel.url
    assert page.locator("#step-1 .output img").count() == 0
    target = tmp_path / "export.html"
    assert cli("thread", "export", thread, "--html", str(target)).code == 0
    bare = tmp_path / "no-csp.html"
    html = target.read_text()
    bare.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html))
    assert "Content-Security-Policy" not in bare.read_text()
    for path in (target, bare):
        page.goto(path.as_uri())
        assert page.locator("#step-1 .output a.image-link").inner_text() == "the pixel"
        page.wait_for_timeout(300)
    assert pixel.hits == []
    files = (target.as_uri(), bare.as_uri())
    only_local([u for u in page.requests if u not in files], server)


def test_a_long_output_is_folded_then_loaded_whole(
    page: Any, server: str, new_thread: Any, tmp_path: Path
) -> None:
    """A 2 MB output: the page renders its start at once and loads the rest when asked."""
    thread = new_thread()
    writer = tmp_path / "long.py"
    writer.write_text(
        "line = 'lorem ipsum dolor sit amet ' * 3 + '\\n'\n"
        "print('---\\nstatus: _\\nplan: p\\nsteps: [a]\\n---\\n' + line * 25_000 + 'THE END')\n"
    )
    step(thread, f"uwf-cmd -- {sys.executable} {writer}")
    page.goto(f"{server}thread/{thread}")
    output = page.locator("#step-1 .output")
    assert "lorem ipsum" in output.inner_text() and "THE END" not in output.inner_text()
    page.click("#step-1 details.more summary")
    page.wait_for_selector("#step-1 details.more", state="detached")
    assert output.inner_text().rstrip().endswith("THE END")
    only_local(page.requests, server)


def test_a_fan_out_shows_its_tree(page: Any, server: str, cli: Any, scenario: Any) -> None:
    import yaml

    examples = REPO / "examples"
    for name in ("dev-task", "plan-parallel"):
        assert cli("workflow", "put", str(examples / f"{name}.yaml")).code == 0
    roles = yaml.safe_load((examples / "plan-parallel.mock.yaml").read_text())["roles"]
    agent = scenario(roles)
    parent = cli("thread", "start", "plan-parallel", "-p", "Three forms").json()["thread"]
    children = cli("thread", "step", parent, "--agent", agent).json()["children"]
    step(children[0], agent)
    page.goto(f"{server}thread/{parent}")
    assert (
        "for its child threads (below) to end; then reviewer joins"
        in page.locator("#waiting").inner_text()
    )
    items = page.locator("#children li").evaluate_all("ls => ls.map(l => l.innerText)")
    assert [item.split()[:2] for item in items] == [
        [children[0], "completed"],
        [children[1], "idle"],
        [children[2], "idle"],
    ]
    assert items[1].endswith("Validate the login form")
    step(children[1], agent)  # live: the section follows the children as they end
    page.wait_for_selector(f'#children li:has(a[href="/thread/{children[1]}"]) .badge.completed')
    page.click(f'#children a[href="/thread/{children[1]}"]')
    page.wait_for_url(re.compile(children[1]))
    assert page.locator("#parent a").inner_text() == parent
    only_local(page.requests, server)


# -- version-1 threads: a working directory, a suspended step ------------------------------


def test_a_thread_page_names_its_working_directory_and_how_to_resume_it(
    page: Any, server: str, cli: Any, new_thread: Any, scenario: Any, tmp_path: Path
) -> None:
    project = tmp_path / 'work <b>dir</b> & "co"'
    v1.write_review(project)
    started = cli("thread", "start", "review", "-p", v1.TASK, "--cwd", project)
    assert started.code == 0, started.err
    thread = started.json()["thread"]
    new_thread()  # registers solve-issue
    nowhere = cli("thread", "start", "solve-issue", "-p", "No working directory", "--no-cwd")
    plain = nowhere.json()["thread"]
    answers = scenario({"planner": [{"attempts": [v1.SUSPEND, v1.PLAN]}]})
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    waits = subprocess.run(
        [str(BIN / "uwf"), "thread", "step", thread, "--agent", answers],
        capture_output=True,
        env=env,
    )
    assert waits.returncode == 6, waits.stderr

    page.goto(f"{server}thread/{thread}")
    assert page.locator("#cwd").inner_text() == str(project)
    assert page.locator("#cwd b").count() == 0  # the name is text, never markup
    said = page.locator("#waiting").inner_text()
    assert "Waits for planner since " in said and ": $SUSPEND: which branch?." in said
    assert f'Resume it with uwf thread resume {thread} -p "…" (the role runs again' in said
    resumed = subprocess.run(
        [str(BIN / "uwf"), "thread", "resume", thread, "-p", v1.ANSWER, "--agent", answers],
        capture_output=True,
        env=env,
    )
    assert resumed.returncode == 0, resumed.stderr
    page.wait_for_selector("#step-1")  # live, from another process
    assert page.locator("#cwd").inner_text() == str(project)
    page.goto(f"{server}thread/{plain}")
    assert page.locator("#status").inner_text() == "idle"
    assert page.locator("#cwd").count() == 0
    only_local(page.requests, server)

    target = tmp_path / "thread.html"
    assert cli("thread", "export", thread, "--html", str(target)).code == 0
    page.goto(target.as_uri())
    assert page.locator("#cwd").inner_text() == str(project)


# -- the graph's edge labels ------------------------------------------------------------------

CROWDED = (
    """\
name: crowded
description: Many edges between few roles, to see where the graph puts their labels.
roles:
"""
    + "".join(
        f"""  {role}:
    description: Role {role}.
    goal: Go.
    capabilities: []
    procedure: Go.
    output: A status.
    meta:
      type: object
      properties:
        status: {{enum: [{", ".join(statuses)}]}}
        items: {{type: array, items: {{type: string}}}}
      required: [status]
"""
        for role, statuses in (
            ("a", ["ok", "fine", "again", "skip-the-review-entirely", "give-up"]),
            ("b", ["approved", "rejected-by-the-reviewer", "send-back", "to-c"]),
            ("c", ["done", "restart-from-the-beginning", "b-again"]),
        )
    )
    + """graph:
  $START:
    _: {role: a, prompt: Go.}
  a:
    ok: {role: b, prompt: Go.}
    fine: {role: b, prompt: Go.}
    again: {role: a, prompt: Go.}
    skip-the-review-entirely: {role: c, prompt: Go.}
    give-up: {role: $END, prompt: Go.}
  b:
    approved: {role: $END, prompt: Go.}
    rejected-by-the-reviewer: {role: a, prompt: Go.}
    send-back: {role: a, prompt: Go.}
    to-c: {role: c, prompt: Go.}
  c:
    done: {role: $END, prompt: Go.}
    restart-from-the-beginning: {role: a, prompt: Go.}
    b-again: {role: b, prompt: Go., fanOut: {field: items, workflow: crowded, task: "{{item}}"}}
"""
)

BOXES = """() => {
  const box = (el, text) => {
    const r = el.getBoundingClientRect();
    return {text: text, left: r.left, top: r.top, right: r.right, bottom: r.bottom};
  };
  const svg = document.querySelector("svg.uwf-graph");
  return {
    labels: [...svg.querySelectorAll("g.label")].map(g => box(g, g.textContent)),
    nodes: [...svg.querySelectorAll("g.node")]
      .map(g => box(g.querySelector("rect"), g.dataset.node)),
  };
}"""


def crossing(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return (
        a["left"] < b["right"]
        and b["left"] < a["right"]
        and a["top"] < b["bottom"]
        and b["top"] < a["bottom"]
    )


def check_labels(page: Any, expected: set[str]) -> None:
    """No edge label covers another, or a node, as Chromium lays them out (text included)."""
    found = page.evaluate(BOXES)
    labels, nodes = found["labels"], found["nodes"]
    assert expected <= {label["text"] for label in labels}
    for i, label in enumerate(labels):
        assert label["right"] > label["left"] and label["bottom"] > label["top"]
        for other in labels[i + 1 :]:
            assert not crossing(label, other), (label, other)
        for node in nodes:
            assert not crossing(label, node), (label, node)


def test_edge_labels_never_cover_each_other_or_a_node(
    page: Any, server: str, cli: Any, scenario: Any, tmp_path: Path
) -> None:
    """A fan-out edge's long label and a back edge's label share the gap between two ranks:
    the back edge goes round it (examples/plan-parallel.yaml: "_ ⇉ fan-out: dev-task" and
    "rejected"); parallel edges' labels stack; a long edge's label stays off the nodes."""
    import yaml

    examples = REPO / "examples"
    for name in ("dev-task", "plan-parallel"):
        assert cli("workflow", "put", str(examples / f"{name}.yaml")).code == 0
    crowded = tmp_path / "crowded.yaml"
    crowded.write_text(CROWDED)
    put = cli("workflow", "put", str(crowded))
    assert put.code == 0, put.err

    page.goto(f"{server}workflow/plan-parallel")
    check_labels(page, {"_ ⇉ fan-out: dev-task", "rejected", "approved", "_"})
    page.goto(f"{server}workflow/crowded")
    check_labels(
        page,
        {"ok", "fine", "skip-the-review-entirely", "restart-from-the-beginning", "to-c"},
    )
    roles = yaml.safe_load((examples / "plan-parallel.mock.yaml").read_text())["roles"]
    agent = scenario(roles)
    parent = cli("thread", "start", "plan-parallel", "-p", "Three forms").json()["thread"]
    assert cli("thread", "step", parent, "--agent", agent).code == 0
    page.goto(f"{server}thread/{parent}")  # a taken edge's label says how often: "×1"
    check_labels(page, {"_ ×1", "_ ⇉ fan-out: dev-task", "rejected"})
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("svg.uwf-graph").screenshot(path=str(ARTIFACTS / "graph-fan-out.png"))


# -- live turns of a step in flight ------------------------------------------------------------


def test_the_turns_of_a_running_step_appear_as_they_are_written(
    page: Any, server: str, root: Path, new_thread: Any, llm: Any
) -> None:
    """docs/ui.md, "Live turns": the page shows each turn uwf-builtin writes while its step
    runs (server-sent `step.turn`), held between two model calls here; the step's section
    takes their place when it lands."""
    import threading

    from llm_server import write_config

    write_config(root, llm.base_url, {"builtin": {"command": "uwf-builtin", "args": []}})
    (Path.cwd() / "notes.txt").write_text("the <b>notes</b>")
    gate = threading.Event()
    llm.reply(
        {
            "content": "Reading <i>the</i> notes first.",
            "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}],
        },
        lambda _request: gate.wait(60) and PLAN,
    )
    thread = new_thread("Plan it")
    page.goto(f"{server}thread/{thread}")
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    running = subprocess.Popen(
        [str(BIN / "uwf"), "thread", "step", thread],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        page.wait_for_selector("#live-turns:not([hidden]) .turn.tool")
        turns = page.locator("#live-turns .turn")
        assert turns.count() == 2 and not gate.is_set()
        assert turns.nth(0).locator("p.who").inner_text() == "turn 1 · assistant"
        assert turns.nth(0).locator("pre").first.inner_text() == "Reading <i>the</i> notes first."
        assert "the <b>notes</b>" in turns.nth(1).inner_text()  # shown as text, never as markup
        assert page.locator("#live-turns b, #live-turns i").count() == 0
        assert page.locator("#running").inner_text() == "step 1 running: planner (uwf-builtin)"
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "live-turns.png"), full_page=True)
        gate.set()
        assert running.wait(timeout=60) == 0
    finally:
        gate.set()
        if running.poll() is None:
            running.kill()
        running.wait(timeout=30)
    page.wait_for_selector("#step-1")
    page.wait_for_selector("#live-turns", state="hidden")
    assert page.locator("#live-turns .turn").count() == 0
    only_local(page.requests, server)
