// durastate console: live updates, nothing else. Loaded from the package (no CDN).
//
// An element #live with data-version-url is polled every second; when the answer changes (a new version
// of the execution, other counts per state) the page is fetched again and #live is replaced by its new
// copy, so the chart, the context, the timers and the trace follow the execution without a reload.
// On a definition page the counts are also drawn as badges on the chart's states (g[data-path]).
(function () {
  "use strict";
  var POLL_MS = 1000;

  function badges() {
    var chart = document.querySelector("#chart[data-counts]");
    if (!chart) return;
    var counts = JSON.parse(chart.getAttribute("data-counts") || "{}");
    chart.querySelectorAll("g[data-path]").forEach(function (g) {
      var n = counts[g.getAttribute("data-path")] || 0;
      g.querySelectorAll(".count-badge-group").forEach(function (old) { old.remove(); });
      if (!n || !g.getBBox) return;
      var box = g.getBBox(), ns = "http://www.w3.org/2000/svg";
      var group = document.createElementNS(ns, "g"), rect = document.createElementNS(ns, "rect");
      var text = document.createElementNS(ns, "text");
      group.setAttribute("class", "count-badge-group");
      rect.setAttribute("class", "count-badge-bg");
      rect.setAttribute("x", box.x + box.width - 26); rect.setAttribute("y", box.y - 8);
      rect.setAttribute("width", 30); rect.setAttribute("height", 16); rect.setAttribute("rx", 8);
      text.setAttribute("class", "count-badge");
      text.setAttribute("x", box.x + box.width - 11); text.setAttribute("y", box.y + 4);
      text.setAttribute("text-anchor", "middle");
      text.textContent = String(n);
      group.appendChild(rect); group.appendChild(text); g.appendChild(group);
    });
  }

  // The counts per status arrive after the page: the page itself is one keyset read of the store.
  function counts() {
    var list = document.getElementById("counts");
    if (!list || !list.dataset.countsUrl) return;
    fetch(list.dataset.countsUrl, { cache: "no-store" }).then(function (r) { return r.ok ? r.json() : null; })
      .then(function (answer) {
        if (!answer) return;
        answer.counts.forEach(function (c) {
          var link = list.querySelector('a[data-status="' + c.status + '"]');
          if (!link) return;
          link.querySelector("b").textContent = c.label;
          link.setAttribute("data-count", String(c.n));
          if (c.capped) link.setAttribute("data-capped", "1"); else link.removeAttribute("data-capped");
        });
      }).catch(function () { /* the counts stay "…" */ });
  }

  function watch() {
    var live = document.getElementById("live");
    if (!live || !live.dataset.versionUrl) return;
    var url = live.dataset.versionUrl, last = null;
    function tick() {
      fetch(url, { cache: "no-store" }).then(function (r) { return r.ok ? r.text() : null; }).then(function (text) {
        if (text === null) return;
        if (last !== null && text !== last) return refresh().then(function () { last = text; });
        last = text;
      }).catch(function () { /* the server is away: try again on the next tick */ })
        .then(function () { window.setTimeout(tick, POLL_MS); });
    }
    tick();
  }

  function refresh() {
    return fetch(window.location.href, { cache: "no-store" }).then(function (r) { return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("live"), old = document.getElementById("live");
        if (!fresh || !old) return;
        var open = {};  // keep the trace steps a reader opened
        old.querySelectorAll("li[data-step] details[open]").forEach(function (d) {
          open[d.parentNode.getAttribute("data-step")] = true;
        });
        fresh.querySelectorAll("li[data-step]").forEach(function (li) {
          if (open[li.getAttribute("data-step")]) li.querySelector("details").setAttribute("open", "");
        });
        old.replaceWith(fresh);
        fresh.classList.add("live-flash");
        document.body.setAttribute("data-refreshed", String(Date.now()));
        badges();
        counts();
      });
  }

  document.addEventListener("DOMContentLoaded", function () { badges(); counts(); watch(); });
})();
