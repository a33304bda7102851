// The target page's what-if panel: changes typed in the CLI's language (`network=15ms queue=0
// generation*1.5`), sent to POST /api/v1/targets/{name}/whatif; the before/after numbers
// go into a table and both end-to-end distributions (quantile curves) onto a uPlot chart set
// up as the page's other charts are (window.phasewatchChartKit, from charts.js).
"use strict";

(function () {
  const pw = window.phasewatch;
  const QUANTILES = ["p50", "p90", "p99"];
  const BEFORE = "#5c6166";
  const AFTER = "#0072B2";

  function kit() {
    return window.phasewatchChartKit;
  }

  function fmtRate(v) {
    return v == null || isNaN(v) ? "—" : (100 * v).toFixed(1) + " %";
  }

  function fmtRates(pair) {
    return pair && pair.length === 2 ? fmtRate(pair[0]) + "–" + fmtRate(pair[1]) : "";
  }

  function fmtInterval(pair) {
    if (!pair || pair.length !== 2) return "";
    return kit().fmtMs(pair[0]) + "–" + kit().fmtMs(pair[1]);
  }

  function cell(row, text, className) {
    const td = document.createElement(row.children.length ? "td" : "th");
    if (!row.children.length) td.scope = "row";
    td.textContent = text;
    if (className) td.className = className;
    row.appendChild(td);
    return td;
  }

  function change(before, after) {
    if (before == null || after == null || !before) return "—";
    const ratio = after / before;
    return (ratio >= 1 ? "+" : "−") + Math.abs(100 * (ratio - 1)).toFixed(0) + " %";
  }

  function fillTable(table, result) {
    const body = table.querySelector("tbody");
    body.textContent = "";
    QUANTILES.forEach(function (q) {
      const row = document.createElement("tr");
      row.dataset.row = q;
      cell(row, q + " end-to-end");
      const b = result.before[q + "_ms"], a = result.after[q + "_ms"];
      cell(row, kit().fmtMs(b.value), "num").dataset.side = "before";
      cell(row, fmtInterval(b.interval), "num muted");
      cell(row, kit().fmtMs(a.value), "num").dataset.side = "after";
      cell(row, fmtInterval(a.interval), "num muted");
      cell(row, change(b.value, a.value), "num");
      body.appendChild(row);
    });
    const miss = document.createElement("tr");
    miss.dataset.row = "miss_rate";
    cell(miss, "deadline missed");
    cell(miss, fmtRate(result.before.miss_rate.value), "num").dataset.side = "before";
    cell(miss, fmtRates(result.before.miss_rate.interval), "num muted");
    cell(miss, fmtRate(result.after.miss_rate.value), "num").dataset.side = "after";
    cell(miss, fmtRates(result.after.miss_rate.interval), "num muted");
    cell(miss, "", "num");
    body.appendChild(miss);
    const lead = document.createElement("tr");
    lead.dataset.row = "dominant";
    cell(lead, "dominant phase");
    cell(lead, result.before.dominant || "—").dataset.side = "before";
    cell(lead, "");
    cell(lead, result.after.dominant || "—").dataset.side = "after";
    cell(lead, result.after.next_dominant ? "next: " + result.after.next_dominant : "");
    cell(lead, "");
    body.appendChild(lead);
    (result.objectives || []).forEach(function (o) {
      // Each latency objective's share met, and goodput's, with their intervals.
      const row = document.createElement("tr");
      row.dataset.row = "objective-" + o.metric;
      cell(row, o.metric + (o.below_ms == null ? "" : " ≤ " + o.below_ms + " ms") + " met");
      cell(row, fmtRate(o.before), "num").dataset.side = "before";
      cell(row, fmtRates(o.before_interval), "num muted");
      cell(row, fmtRate(o.after), "num").dataset.side = "after";
      cell(row, fmtRates(o.after_interval), "num muted");
      const burns = o.burn_before && o.burn_after;
      cell(row, burns ? "burn " + o.burn_before.value.toFixed(2) + "× → " + o.burn_after.value.toFixed(2) + "×" : "", "num");
      body.appendChild(row);
    });
    table.hidden = false;
  }

  function deadlineLine(deadline) {
    return function (u) {
      if (deadline == null) return;
      const y = Math.round(u.valToPos(deadline, "y", true));
      const ctx = u.ctx;
      ctx.save();
      ctx.strokeStyle = pw.cssVar("--bad");
      ctx.lineWidth = 1.5 * devicePixelRatio;
      ctx.setLineDash([4 * devicePixelRatio, 3 * devicePixelRatio]);
      ctx.beginPath();
      ctx.moveTo(u.bbox.left, y);
      ctx.lineTo(u.bbox.left + u.bbox.width, y);
      ctx.stroke();
      ctx.restore();
    };
  }

  function draw(element, result) {
    const curves = result.curves;
    const axes = kit().axes("end-to-end", kit().fmtMs);
    axes[0].values = function (u, values) { return values.map(function (v) { return v + " %"; }); };
    axes[0].label = "percentile";
    const options = {
      width: kit().width(element),
      height: 260,
      scales: { x: { time: false }, y: { range: function (u, min, max) { return [0, Math.max(1, max * 1.05)]; } } },
      series: [
        { label: "percentile", value: function (u, v) { return v == null ? "—" : v + " %"; } },
        { label: "before", stroke: BEFORE, width: 2, value: function (u, v) { return kit().fmtMs(v); } },
        { label: "after", stroke: AFTER, width: 2, dash: [6, 4], value: function (u, v) { return kit().fmtMs(v); } },
      ],
      axes: axes,
      hooks: { draw: [deadlineLine(result.after.deadline_ms)] },
    };
    element.textContent = "";
    return new uPlot(options, [curves.percentiles, curves.before_ms, curves.after_ms], element);
  }

  function Panel(root) {
    this.root = root;
    this.form = root.querySelector("form");
    this.status = root.querySelector("[data-whatif-status]");
    this.table = root.querySelector("table");
    this.chart = root.querySelector("[data-chart=whatif]");
    this.notes = root.querySelector("[data-whatif-notes]");
    this.plot = null;
    this.result = null;
  }

  Panel.prototype.body = function () {
    const text = this.form.elements.changes.value;
    const body = { changes: text.split(/\s+/).filter(Boolean) };
    if (this.root.dataset.vantage) body.vantage = this.root.dataset.vantage;
    return body;
  };

  Panel.prototype.say = function (text, kind) {
    this.status.hidden = false;
    this.status.className = "notice " + kind;
    this.status.textContent = text;
  };

  Panel.prototype.submit = async function (event) {
    event.preventDefault();
    const button = this.form.querySelector("button[type=submit]");
    button.disabled = true;
    this.say("Resampling…", "ok");
    try {
      const url = "/api/v1/targets/" + encodeURIComponent(this.root.dataset.target) + "/whatif";
      const response = await pw.api("POST", url, this.body());
      const data = await response.json();
      if (!response.ok) {
        this.say("Refused: " + (typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail)), "error");
        return;
      }
      this.show(data);
    } catch (error) {
      this.say("Could not reach the server: " + error, "error");
    } finally {
      button.disabled = false;
    }
  };

  Panel.prototype.show = function (data) {
    this.result = data;
    fillTable(this.table, data);
    this.notes.textContent = "";
    (data.notes || []).forEach(function (note) {
      const item = document.createElement("li");
      item.textContent = typeof note === "string" ? note : note.text;
      this.notes.appendChild(item);
    }, this);
    this.say(data.before.samples + " samples in " + data.before.runs + " runs, resampled run by run " + data.resamples + " times; 95 % intervals.", "ok");
    this.redraw();
  };

  Panel.prototype.redraw = function () {
    if (!this.result) return;
    if (this.plot) this.plot.destroy();
    this.chart.hidden = false; // no empty box before the first prediction
    this.plot = draw(this.chart, this.result);
    this.chart.dataset.drawn = "true";
  };

  function start() {
    document.querySelectorAll("[data-whatif]").forEach(function (root) {
      const panel = new Panel(root);
      panel.form.addEventListener("submit", function (event) { panel.submit(event); });
      document.addEventListener("phasewatch:theme", function () { panel.redraw(); });
      window.addEventListener("resize", function () {
        if (panel.plot) panel.plot.setSize({ width: kit().width(panel.chart), height: 260 });
      });
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
