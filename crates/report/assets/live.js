// brokerbench live dashboard: fetches this page again every second and, when it changed,
// puts the new <main> and chart data in place and has the report script redraw. Records on
// <body> how many updates it applied (data-updates) and whether it is live (data-live), so a
// headless browser can check it.
"use strict";
(function () {
  const body = document.body;
  let last = null;
  let updates = 0;
  body.dataset.updates = "0";
  body.dataset.live = liveOf(document);

  function liveOf(doc) {
    const banner = doc.getElementById("live-banner");
    return banner ? banner.dataset.live : "running";
  }

  function apply(html) {
    const next = new DOMParser().parseFromString(html, "text/html");
    const main = next.querySelector("main");
    const data = next.getElementById("report-data");
    // The page served before the folder had a report has no report script: load it whole.
    if (!main || !data || !window.brokerbenchReport) {
      location.reload();
      return "reloading";
    }
    const live = liveOf(next);
    document.querySelector("main").replaceWith(document.adoptNode(main));
    document.getElementById("report-data").textContent = data.textContent;
    window.brokerbenchReport.render();
    updates += 1;
    body.dataset.updates = String(updates);
    return live;
  }

  function gone() {
    const banner = document.getElementById("live-banner");
    if (banner) {
      banner.textContent = "brokerbench no longer answers: the run or study ended or was " +
        "stopped. Its report.html is in its results folder.";
      banner.className = "banner bad";
    }
    body.dataset.live = "gone";
  }

  // Fetches that failed in a row: a busy server (503) or a slow answer is tried again; three
  // failures in a row mean brokerbench has gone.
  let failures = 0;

  async function tick() {
    let html;
    try {
      const response = await fetch(location.pathname, { cache: "no-store" });
      if (!response.ok) throw new Error("HTTP " + response.status);
      html = await response.text();
      failures = 0;
    } catch (e) {
      failures += 1;
      if (failures >= 3) gone();
      else setTimeout(tick, 1000);
      return;
    }
    let live = body.dataset.live;
    try {
      if (html !== last) live = apply(html);
    } catch (e) {
      // A page that could not be put in place: the next one may be (report.js shows a failed render).
    }
    last = html;
    body.dataset.live = live;
    if (live === "running") setTimeout(tick, 1000);
  }

  if (body.dataset.live === "running") setTimeout(tick, 1000);
})();
