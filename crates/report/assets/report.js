// brokerbench report: draws the charts described in the embedded JSON with uPlot, makes
// tables sortable, and records on <body> what it drew (data-status, per chart data-points),
// so a headless browser can check the page.
"use strict";
(function () {
  const body = document.body;
  const errors = [];
  window.addEventListener("error", (e) => {
    errors.push(String(e.message || e));
    body.dataset.status = "error: " + errors.join("; ");
  });

  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
    "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];

  function fmtNs(v) {
    if (v == null || !isFinite(v)) return "—";
    const a = Math.abs(v);
    if (a < 1e3) return v.toFixed(0) + " ns";
    if (a < 1e6) return (v / 1e3).toPrecision(3) + " µs";
    if (a < 1e9) return (v / 1e6).toPrecision(3) + " ms";
    return (v / 1e9).toPrecision(3) + " s";
  }
  function fmtNum(v) {
    if (v == null || !isFinite(v)) return "—";
    const a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toPrecision(3) + "G";
    if (a >= 1e6) return (v / 1e6).toPrecision(3) + "M";
    if (a >= 1e4) return (v / 1e3).toPrecision(3) + "K";
    if (a >= 100 || Number.isInteger(v)) return v.toFixed(0);
    return v.toPrecision(3);
  }
  function fmtBytes(v) {
    if (v == null || !isFinite(v)) return "—";
    const a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toPrecision(3) + " GB";
    if (a >= 1e6) return (v / 1e6).toPrecision(3) + " MB";
    if (a >= 1e3) return (v / 1e3).toPrecision(3) + " kB";
    return v.toFixed(0) + " B";
  }
  const FORMAT = { ns: fmtNs, bytes: fmtBytes, pct: (v) => (v == null ? "—" : v.toFixed(1) + "%"),
    ratio: (v) => (v == null ? "—" : (v * 100).toFixed(1) + "%"), count: fmtNum };
  const fmt = (unit) => FORMAT[unit] || fmtNum;

  // Tick steps: whole seconds on time axes, 1-2-5 steps of whole units for counts and bytes.
  const WHOLE_STEPS = [];
  for (let e = 0; e <= 15; e++) for (const m of [1, 2, 5]) WHOLE_STEPS.push(m * Math.pow(10, e));
  const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 28800, 86400];

  // The percentile axis: x = 1 / (1 - p), log scale, labelled as percentiles.
  const SPECTRUM_TICKS = [1, 2, 4, 10, 100, 1e3, 1e4, 1e5];
  function percentileLabel(x) {
    const p = 100 * (1 - 1 / x);
    if (x <= 1) return "0%";
    return (Math.round(p * 1000) / 1000) + "%";
  }

  // Log axes: splits and labels at whole decades only, the scale widened to whole decades so
  // there are always at least two labels, and 2…9 × 10^k as short light ticks (minorTickPlugin):
  // a label or a grid line at every minor step is a comb that runs into the decade labels.
  function decades(min, max) {
    const out = [];
    if (!(min > 0) || !(max > 0)) return out;
    for (let k = Math.floor(Math.log10(min) + 1e-9); Math.pow(10, k) <= max * (1 + 1e-9); k++) {
      const v = Math.pow(10, k);
      if (v >= min * (1 - 1e-9)) out.push(v);
    }
    return out;
  }
  function decadeRange(u, min, max) {
    if (!(min > 0) || !(max > 0)) return [1, 10];
    const low = Math.pow(10, Math.floor(Math.log10(min) + 1e-9));
    const high = Math.pow(10, Math.ceil(Math.log10(max) - 1e-9));
    return [low, high > low ? high : low * 10];
  }
  // Height of one decade on a log scale, in CSS pixels.
  function decadeHeight(u, scale) {
    return Math.abs(u.valToPos(1, scale) - u.valToPos(10, scale));
  }
  // On a short chart over many decades, every decade's label would touch the next: label
  // every second (or third…) decade only.
  const MIN_LABEL_GAP = 24;
  function thinDecades(u, vs, axisIdx) {
    const step = Math.ceil(MIN_LABEL_GAP / Math.max(1e-9, decadeHeight(u, u.axes[axisIdx].scale)));
    return vs.map((v) => (step <= 1 || Math.round(Math.log10(v)) % step === 0 ? v : null));
  }
  function minorTickPlugin(scale) {
    return {
      hooks: {
        draw: (u) => {
          const { min, max } = u.scales[scale];
          if (!(min > 0) || !(max > 0)) return;
          // 2…9 where a decade is tall enough to show them apart, else 2 and 5, else none.
          const height = decadeHeight(u, scale);
          const multiples = height >= 40 ? [2, 3, 4, 5, 6, 7, 8, 9] : height >= 12 ? [2, 5] : [];
          const ctx = u.ctx;
          const x = u.bbox.left;
          const length = 4 * devicePixelRatio;
          ctx.save();
          ctx.strokeStyle = "rgba(0,0,0,0.3)";
          ctx.lineWidth = devicePixelRatio;
          ctx.beginPath();
          for (let k = Math.floor(Math.log10(min)); Math.pow(10, k) < max; k++) {
            for (const m of multiples) {
              const v = m * Math.pow(10, k);
              if (v <= min || v >= max) continue;
              const y = Math.round(u.valToPos(v, scale, true)) + 0.5;
              ctx.moveTo(x - length, y); ctx.lineTo(x, y);
            }
          }
          ctx.stroke();
          ctx.restore();
        },
      },
    };
  }

  // Shades of the phases, outages and stalls on time charts.
  const PHASE_FILL = {
    warmup: "rgba(255,200,0,0.12)",
    drain: "rgba(120,120,255,0.12)",
    outage: "rgba(220,40,40,0.18)",
    stall: "rgba(255,140,0,0.22)",
    blocked: "rgba(150,40,200,0.18)",
    fault: "rgba(60,60,60,0.12)",
  };

  // A dashed line where a span starts, with its label (a fault's number) beside it.
  function markStart(ctx, u, x, label) {
    const dpr = devicePixelRatio;
    ctx.strokeStyle = "rgba(60,60,60,0.8)";
    ctx.lineWidth = dpr;
    ctx.setLineDash([4 * dpr, 3 * dpr]);
    ctx.beginPath();
    ctx.moveTo(x, u.bbox.top);
    ctx.lineTo(x, u.bbox.top + u.bbox.height);
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = "rgba(40,40,40,0.9)";
    ctx.font = `${11 * dpr}px sans-serif`;
    ctx.fillText(label, x + 3 * dpr, u.bbox.top + 12 * dpr);
  }

  // Shades warm-up, drain, outages and stalls on time charts (before the series are drawn).
  function phasePlugin(phases) {
    return {
      hooks: {
        drawClear: (u) => {
          const ctx = u.ctx;
          for (const ph of phases || []) {
            if (ph.name === "measurement") continue;
            // Within the plot: a span beyond the last second, or outside a zoom, is cut off.
            const left = u.bbox.left, right = u.bbox.left + u.bbox.width;
            const x0 = Math.max(left, u.valToPos(ph.start, "x", true));
            const x1 = Math.min(right, u.valToPos(ph.end, "x", true));
            if (x0 >= right || x1 <= left) continue;
            ctx.save();
            ctx.fillStyle = PHASE_FILL[ph.name] || "rgba(120,120,255,0.12)";
            ctx.fillRect(x0, u.bbox.top, Math.max(1, x1 - x0), u.bbox.height);
            if (ph.label && u.valToPos(ph.start, "x", true) >= left) markStart(ctx, u, x0, ph.label);
            ctx.restore();
          }
        },
      },
    };
  }

  // Vertical whiskers for series that carry low/high bounds (95% CI).
  function whiskerPlugin(spec) {
    return {
      hooks: {
        draw: (u) => {
          const ctx = u.ctx;
          spec.series.forEach((s, i) => {
            if (!s.low || !s.high || !u.series[i + 1].show) return;
            ctx.save();
            ctx.strokeStyle = u.series[i + 1]._stroke || COLORS[i % COLORS.length];
            ctx.lineWidth = 1.5 * devicePixelRatio;
            const scale = u.series[i + 1].scale;
            for (let j = 0; j < spec.xs.length; j++) {
              const lo = s.low[j], hi = s.high[j];
              if (lo == null || hi == null) continue;
              const x = u.valToPos(spec.xs[j], "x", true);
              const y0 = u.valToPos(Math.max(lo, spec.logY ? 1e-9 : lo), scale, true);
              const y1 = u.valToPos(hi, scale, true);
              const w = 4 * devicePixelRatio;
              ctx.beginPath();
              ctx.moveTo(x, y0); ctx.lineTo(x, y1);
              ctx.moveTo(x - w, y0); ctx.lineTo(x + w, y0);
              ctx.moveTo(x - w, y1); ctx.lineTo(x + w, y1);
              ctx.stroke();
            }
            ctx.restore();
          });
        },
      },
    };
  }

  // Vertical markers (e.g. the found rate of a search).
  function markerPlugin(markers) {
    return {
      hooks: {
        draw: (u) => {
          const ctx = u.ctx;
          for (const m of markers || []) {
            const x = u.valToPos(m.x, "x", true);
            ctx.save();
            ctx.strokeStyle = m.color || "#444";
            ctx.setLineDash([6 * devicePixelRatio, 4 * devicePixelRatio]);
            ctx.lineWidth = devicePixelRatio;
            ctx.beginPath();
            ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height);
            ctx.stroke();
            ctx.fillStyle = m.color || "#444";
            ctx.font = (11 * devicePixelRatio) + "px sans-serif";
            ctx.fillText(m.label, x + 4 * devicePixelRatio, u.bbox.top + 12 * devicePixelRatio);
            ctx.restore();
          }
        },
      },
    };
  }

  function drawChart(el, spec, phases) {
    const width = Math.max(320, el.clientWidth || 900);
    const unitY = spec.unitY || "count";
    const unitY2 = spec.unitY2 || unitY;
    const xs = spec.xs;
    const data = [xs];
    const series = [{
      label: spec.xLabel || "x",
      value: (u, v) => (v == null ? "—" : spec.xLabels ? (spec.xLabels[xs.indexOf(v)] ?? String(v)) : spec.x === "spectrum" ? percentileLabel(v)
        : spec.x === "time" ? v.toFixed(0) + " s" : (spec.xUnit ? fmt(spec.xUnit)(v) : fmtNum(v))),
    }];
    let points = 0;
    spec.series.forEach((s, i) => {
      const values = s.values.map((v) => (v == null || (spec.logY && v <= 0) ? null : v));
      points += values.filter((v) => v != null).length;
      data.push(values);
      const unit = s.axis === 1 ? unitY2 : unitY;
      series.push({
        label: s.label,
        scale: s.axis === 1 ? "y2" : "y",
        stroke: s.color || COLORS[i % COLORS.length],
        width: s.width || 1.5,
        dash: s.dash ? [6, 4] : undefined,
        points: { show: spec.points || s.points || false, size: 6 },
        spanGaps: spec.x !== "time",
        value: (u, v) => fmt(unit)(v),
      });
    });
    const axes = [
      spec.x === "spectrum"
        ? { label: spec.xLabel, splits: () => SPECTRUM_TICKS, filter: (u, vs) => vs,
            values: (u, vs) => vs.map((v) => (v == null ? "" : percentileLabel(v))) }
        : spec.xLabels
          ? { label: spec.xLabel, splits: () => xs, values: (u, vs) => vs.map((v) => { const i = xs.indexOf(v); return i < 0 ? "" : spec.xLabels[i]; }) }
          : spec.logX
            ? { label: spec.xLabel, splits: () => xs, values: (u, vs) => vs.map((v) => fmtNum(v)) }
            : { label: spec.xLabel, incrs: spec.x === "time" ? TIME_STEPS : undefined,
              values: (u, vs) => vs.map((v) => (spec.xUnit ? fmt(spec.xUnit)(v) : fmtNum(v))) },
      spec.logY
        ? { label: spec.yLabel, size: 70, splits: (u, i, min, max) => decades(min, max), filter: (u, vs, i) => thinDecades(u, vs, i),
            values: (u, vs) => vs.map((v) => (v == null ? "" : fmt(unitY)(v))), ticks: { size: 8, stroke: "rgba(0,0,0,0.45)", width: 1 } }
        : { label: spec.yLabel, values: (u, vs) => vs.map((v) => (v == null ? "" : fmt(unitY)(v))), size: 70,
            incrs: unitY === "count" || unitY === "bytes" ? WHOLE_STEPS : undefined },
    ];
    const scales = {
      x: spec.x === "spectrum" ? { time: false, distr: 3, log: 10, range: [1, spec.xMax || 1e5] }
        : spec.xLabels ? { time: false, range: [-0.5, xs.length - 0.5] }
        : spec.logX ? { time: false, distr: 3, log: 10 } : { time: false },
      y: spec.logY ? { distr: 3, log: 10, range: decadeRange } : { range: (u, min, max) => [Math.min(0, min), max > 0 ? max * 1.05 : 1] },
    };
    if (spec.series.some((s) => s.axis === 1)) {
      axes.push({ scale: "y2", side: 1, label: spec.y2Label, grid: { show: false },
        incrs: unitY2 === "count" || unitY2 === "bytes" ? WHOLE_STEPS : undefined,
        values: (u, vs) => vs.map((v) => fmt(unitY2)(v)), size: 70 });
      scales.y2 = { range: (u, min, max) => [Math.min(0, min), max > 0 ? max * 1.05 : 1] };
    }
    const plugins = [];
    if (spec.x === "time") plugins.push(phasePlugin(phases));
    if (spec.logY) plugins.push(minorTickPlugin("y"));
    if (spec.series.some((s) => s.low)) plugins.push(whiskerPlugin(spec));
    if (spec.markers) plugins.push(markerPlugin(spec.markers));
    const opts = { width, height: spec.height || 260, series, axes, scales, plugins,
      legend: { live: true }, cursor: { drag: { x: true, y: false } } };
    const plot = new uPlot(opts, data, el);
    el.dataset.points = String(points);
    el.dataset.width = String(plot.width);
    el.dataset.height = String(plot.height);
    return plot;
  }

  function sortable(table) {
    const ths = table.querySelectorAll("thead th");
    ths.forEach((th, col) => {
      th.title = "click to sort";
      th.addEventListener("click", () => {
        const tbody = table.tBodies[0];
        const rows = Array.from(tbody.rows);
        const asc = th.dataset.sort !== "asc";
        ths.forEach((t) => delete t.dataset.sort);
        th.dataset.sort = asc ? "asc" : "desc";
        const key = (r) => {
          const c = r.cells[col];
          const raw = c.dataset.value !== undefined ? c.dataset.value : c.textContent;
          const n = parseFloat(raw);
          return isNaN(n) ? raw : n;
        };
        rows.sort((a, b) => {
          const x = key(a), y = key(b);
          const d = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
          return asc ? d : -d;
        });
        rows.forEach((r) => tbody.appendChild(r));
      });
    });
  }

  // What the viewer changed on a chart: a zoom (the x range differs from the one it was drawn
  // with) and the series hidden from its legend; the view still to be put back on a chart
  // drawn so recently that uPlot has not set its range yet.
  function viewOf({ plot, drawn, pending }) {
    if (drawn === null) return pending;
    const x = plot.scales.x;
    const zoomed = x.min !== drawn[0] || x.max !== drawn[1];
    return { zoom: zoomed ? [x.min, x.max] : null,
      hidden: plot.series.slice(1).filter((s) => !s.show).map((s) => s.label) };
  }

  // The viewer's changes put back on a redrawn chart.
  function restore(plot, view) {
    if (!view) return;
    plot.series.forEach((s, i) => {
      if (i > 0 && view.hidden.includes(s.label)) plot.setSeries(i, { show: false });
    });
    if (view.zoom) plot.setScale("x", { min: view.zoom[0], max: view.zoom[1] });
  }

  // Draws every chart from the page's data, after removing what an earlier call drew (the
  // live dashboard calls it again when it has put new data in place), keeping each chart's
  // zoom and hidden series (a double click shows the whole chart again).
  let charts = [];
  function render() {
    const views = new Map();
    for (const chart of charts) {
      views.set(chart.el.id, viewOf(chart));
      chart.plot.destroy();
    }
    charts = [];
    // A failure of an earlier render is not this one's: only the page's own errors stay.
    document.querySelectorAll("pre.report-error").forEach((old) => old.remove());
    try {
      const DATA = JSON.parse(document.getElementById("report-data").textContent);
      for (const spec of DATA.charts || []) {
        const el = document.getElementById("chart-" + spec.id);
        if (!el) throw new Error("no element for chart " + spec.id);
        const plot = drawChart(el, spec, DATA.phases);
        const chart = { el, plot, drawn: null, pending: views.get(el.id) };
        charts.push(chart);
        // uPlot sets its scales in a microtask of its own, queued when it was made: after
        // it, the x range is the one drawn from the data, and the viewer's can be put back.
        queueMicrotask(() => {
          if (!charts.includes(chart)) return;
          chart.drawn = [plot.scales.x.min, plot.scales.x.max];
          try {
            restore(plot, chart.pending);
          } catch (e) {
            errors.push("restoring a chart's zoom: " + e);
            body.dataset.status = "error: " + errors.join("; ");
          }
        });
      }
      document.querySelectorAll("table.sortable").forEach(sortable);
      body.dataset.charts = String(charts.length);
      body.dataset.status = errors.length ? "error: " + errors.join("; ") : "ok";
    } catch (e) {
      const failed = errors.concat([String(e && e.stack || e)]).join("; ");
      body.dataset.status = "error: " + failed;
      const p = document.createElement("pre");
      p.className = "report-error";
      p.textContent = "This report could not draw its charts: " + failed;
      body.prepend(p);
    }
  }
  window.addEventListener("resize", () => {
    for (const { el, plot } of charts) plot.setSize({ width: Math.max(320, el.clientWidth), height: plot.height });
  });
  // render, and the drawn charts by element id (for tests in a browser).
  window.brokerbenchReport = { render, plot: (id) => (charts.find(({ el }) => el.id === id) || {}).plot };
  render();
})();
