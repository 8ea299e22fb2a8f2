// uwf web view: live updates over server-sent events and details loaded on demand.
// Every HTML fragment comes from the server, rendered and escaped there.
(function () {
  "use strict";
  const body = document.body;

  document.addEventListener("toggle", function (ev) {
    const el = ev.target;
    if (!(el instanceof HTMLDetailsElement) || !el.open || !el.dataset.src || el.dataset.loaded) return;
    el.dataset.loaded = "1";
    fetch(el.dataset.src).then(function (r) { return r.text(); }).then(function (html) {
      if (el.dataset.replace) {  // a folded output: the whole one takes the place of its start
        el.previousElementSibling.innerHTML = html;
        el.remove();
      } else {
        el.querySelector(".body").innerHTML = html;
      }
    });
  }, true);

  if (!body.dataset.events || !window.EventSource) return;
  const source = new EventSource(body.dataset.events);
  const $ = function (id) { return document.getElementById(id); };

  function setStatus(status) {
    const badge = $("status");
    if (badge) { badge.textContent = status; badge.className = "badge " + status; }
  }

  function refreshList() {
    fetch("/fragment/threads" + window.location.search).then(function (r) { return r.text(); })
      .then(function (html) { const t = $("threads"); if (t) t.innerHTML = html; });
  }

  source.addEventListener("step.started", function (ev) {
    const d = JSON.parse(ev.data);
    if (body.dataset.live === "list") { refreshList(); return; }
    const running = $("running");
    running.textContent = "step " + d.number + " running: " + (d.role || "?") +
      (d.agent ? " (" + d.agent + ")" : "");
    running.hidden = false;
    const live = $("live-turns");
    if (live && live.dataset.step !== String(d.number)) endLiveTurns();
    setStatus("running");
  });

  source.addEventListener("step.turn", function (ev) {
    const d = JSON.parse(ev.data);
    const live = $("live-turns");
    // a turn read after its step landed (the stream polls the live file): the step's own
    // section holds it now
    if (!live || $("step-" + d.number)) return;
    if (live.dataset.step !== String(d.number)) { live.innerHTML = ""; live.dataset.step = d.number; }
    live.insertAdjacentHTML("beforeend", d.html);
    live.hidden = false;
  });

  function endLiveTurns() {
    const live = $("live-turns");
    if (live) { live.hidden = true; live.innerHTML = ""; delete live.dataset.step; }
  }

  source.addEventListener("step.completed", function (ev) {
    const d = JSON.parse(ev.data);
    if (body.dataset.live === "list") { refreshList(); return; }
    if (!$("step-" + d.number)) {
      $("steps").insertAdjacentHTML("beforeend", d.html);
      $("step-" + d.number).classList.add("new");
    }
    $("graph").innerHTML = d.graph;
    $("count").textContent = d.count;
    $("running").hidden = true;
    endLiveTurns();
    const next = $("next");
    if (next) next.remove();
    setStatus(d.status);
  });

  source.addEventListener("children.changed", function (ev) {
    const d = JSON.parse(ev.data);
    const section = $("family-children");
    if (section) section.innerHTML = d.html;
  });

  source.addEventListener("thread.opened", function () {
    if (body.dataset.live === "list") refreshList();
  });

  source.addEventListener("thread.archived", function (ev) {
    const d = JSON.parse(ev.data);
    if (body.dataset.live === "list") { refreshList(); return; }
    $("running").hidden = true;
    endLiveTurns();
    setStatus(d.status);
    if (d.graph) $("graph").innerHTML = d.graph;
    source.close();
  });
})();
