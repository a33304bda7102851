// Target and compare charts from /api/v1/targets/{name}/history (columnar JSON):
//   phases   stacked phase medians (or shares) over time: where the time went, and when that moved
//   total    end-to-end p50 / p90 / p99 with the p50–p99 band
//   heatmap  day × hour-of-day grid of hourly p99: busy hours show up
// Every chart is redrawn on a theme change and reloaded on each auto-refresh.
"use strict";

(function () {
  const pw = window.phasewatch;
  const HOUR = 3600;
  const DAY = 86400;
  const HEAT_MIN_RANGE = 7 * DAY;
  const HEAT_MAX_RANGE = 28 * DAY; // hourly buckets: the API answers at most 2000
  // viridis: sequential and readable with every common colour-vision deficiency
  const RAMP = ["#440154", "#472c7a", "#3b518b", "#2c718e", "#21908d", "#27ad81", "#5cc863", "#aadc32", "#fde725"];
  const QUANTILE_LINES = [
    { key: "p50", width: 2, dash: [] },
    { key: "p90", width: 1.5, dash: [6, 4] },
    { key: "p99", width: 1.5, dash: [2, 3] },
  ];

  function fmtMs(v) {
    if (v == null || isNaN(v)) return "—";
    if (v >= 10000) return (v / 1000).toFixed(1) + " s";
    if (v >= 1000) return (v / 1000).toFixed(2) + " s";
    if (v >= 100) return v.toFixed(0) + " ms";
    if (v >= 10) return v.toFixed(1) + " ms";
    return v.toFixed(2) + " ms";
  }

  function fmtPct(v) {
    return v == null || isNaN(v) ? "—" : v.toFixed(0) + " %";
  }

  function colourOf(phase) {
    return pw.phaseColours[phase] || "#777777";
  }

  function withAlpha(hex, alpha) {
    const n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + alpha + ")";
  }

  function phaseNames(history) {
    const present = Object.keys(history.phase_quantiles || {});
    const known = Object.keys(pw.phaseColours).filter(function (p) { return present.includes(p); });
    return known.concat(present.filter(function (p) { return !known.includes(p); }));
  }

  // The page's "now" is the server's (the story's, inside `phasewatch demo`), moving on at the
  // browser's pace: a window drawn from the browser's own clock would miss those runs.
  function clockOf(element) {
    const serverNow = Number(element.dataset.nowSeconds);
    const skew = serverNow ? serverNow - Date.now() / 1000 : 0;
    return function () { return Math.floor(Date.now() / 1000 + skew); };
  }

  function historyUrl(target, vantage, fromS, toS, bucket) {
    const params = new URLSearchParams({
      from: new Date(fromS * 1000).toISOString(),
      to: new Date(toS * 1000).toISOString(),
    });
    if (vantage) params.set("vantage", vantage);
    if (bucket) params.set("bucket", String(bucket));
    return "/api/v1/targets/" + encodeURIComponent(target) + "/history?" + params.toString();
  }

  async function fetchHistory(url) {
    const response = await fetch(url, { headers: { Accept: "application/json" } });
    if (!response.ok) throw new Error(url + ": HTTP " + response.status);
    return response.json();
  }

  function axes(unitLabel, format) {
    const axis = pw.cssVar("--chart-axis");
    const grid = pw.cssVar("--chart-grid");
    return [
      { stroke: axis, grid: { stroke: grid }, ticks: { stroke: grid } },
      {
        stroke: axis,
        grid: { stroke: grid },
        ticks: { stroke: grid },
        label: unitLabel,
        size: 64,
        values: function (u, values) { return values.map(format); },
      },
    ];
  }

  // uPlot's stacking recipe: cumulative sums, and a band between each series and the one below.
  function stack(raw) {
    const length = raw.length ? raw[0].length : 0;
    const sums = new Array(length).fill(0);
    const gaps = new Array(length).fill(true);
    raw.forEach(function (series) {
      series.forEach(function (v, i) { if (v != null) gaps[i] = false; });
    });
    const stacked = raw.map(function (series) {
      return series.map(function (v, i) {
        if (gaps[i]) return null;
        sums[i] += v == null ? 0 : v;
        return sums[i];
      });
    });
    const bands = [];
    for (let i = 2; i <= raw.length; i++) bands.push({ series: [i, i - 1] });
    return { stacked: stacked, bands: bands };
  }

  // A bucket between two empty ones is a line of no length, which uPlot draws as nothing:
  // a run alone in its bucket (a late run, a long interval) gets a point instead. Gaps stay
  // gaps, so a probe that stopped is not drawn over.
  function isolatedPoints(u, seriesIndex) {
    const values = u.data[seriesIndex];
    const found = [];
    for (let i = 0; i < values.length; i++) {
      if (values[i] != null && values[i - 1] == null && values[i + 1] == null) found.push(i);
    }
    return found.length ? found : null;
  }

  function loneRunPoints(colour) {
    return { show: false, filter: isolatedPoints, size: 6, stroke: colour, fill: colour };
  }

  function alertMarkers(marks) {
    return function (u) {
      const ctx = u.ctx;
      ctx.save();
      ctx.strokeStyle = pw.cssVar("--bad");
      ctx.lineWidth = 1.5 * devicePixelRatio;
      ctx.setLineDash([4 * devicePixelRatio, 3 * devicePixelRatio]);
      marks.forEach(function (mark) {
        if (mark.until != null) return maintenanceBand(u, mark);
        if (mark.at < u.scales.x.min || mark.at > u.scales.x.max) return;
        const x = Math.round(u.valToPos(mark.at, "x", true));
        ctx.beginPath();
        ctx.moveTo(x, u.bbox.top);
        ctx.lineTo(x, u.bbox.top + u.bbox.height);
        ctx.stroke();
      });
      ctx.restore();
    };
  }

  // A maintenance span: a shaded band the chart's height, its window's name at the top.
  function maintenanceBand(u, mark) {
    if (mark.until < u.scales.x.min || mark.at > u.scales.x.max) return;
    const left = Math.round(u.valToPos(Math.max(mark.at, u.scales.x.min), "x", true));
    const right = Math.round(u.valToPos(Math.min(mark.until, u.scales.x.max), "x", true));
    const ctx = u.ctx;
    ctx.save();
    ctx.setLineDash([]);
    ctx.fillStyle = withAlpha(pw.cssVar("--muted") || "#888888", 0.18);
    ctx.fillRect(left, u.bbox.top, Math.max(1, right - left), u.bbox.height);
    ctx.fillStyle = pw.cssVar("--muted") || "#888888";
    ctx.font = 11 * devicePixelRatio + "px sans-serif";
    ctx.fillText(mark.label, left + 3 * devicePixelRatio, u.bbox.top + 12 * devicePixelRatio);
    ctx.restore();
  }

  // Every time on these pages is UTC, the charts' axes too, wherever the reader is.
  function utcDate(seconds) {
    return uPlot.tzDate(new Date(seconds * 1000), "Etc/UTC");
  }

  function width(element) {
    return Math.max(300, element.clientWidth || 600);
  }

  function drawPhases(element, history, mode, marks) {
    const names = phaseNames(history);
    const raw = names.map(function (name) {
      if (mode === "share") {
        return (history.shares[name] || []).map(function (v) { return v == null ? null : v * 100; });
      }
      return (history.phase_quantiles[name] || {}).p50 || [];
    });
    const result = stack(raw);
    const format = mode === "share" ? fmtPct : fmtMs;
    const series = [{}].concat(
      names.map(function (name, i) {
        return {
          label: name,
          stroke: colourOf(name),
          fill: withAlpha(colourOf(name), 0.75),
          width: 1,
          points: loneRunPoints(colourOf(name)),
          value: function (u, v, si, di) { return di == null ? "—" : format(raw[i][di]); },
        };
      }),
    );
    const options = {
      width: width(element),
      height: 280,
      tzDate: utcDate,
      series: series,
      bands: result.bands,
      axes: axes(mode === "share" ? "share of medians" : "median", mode === "share" ? fmtPct : fmtMs),
      scales: { y: { range: function (u, min, max) { return [0, mode === "share" ? 100 : Math.max(1, max * 1.05)]; } } },
      hooks: { draw: [alertMarkers(marks)] },
    };
    return new uPlot(options, [history.time].concat(result.stacked), element);
  }

  function drawTotal(element, history, marks) {
    const total = history.total || {};
    const text = pw.cssVar("--text");
    const lineColours = { p50: text, p90: "#0072B2", p99: "#D55E00" };
    const series = [{}].concat(
      QUANTILE_LINES.map(function (line) {
        return {
          label: line.key + " end-to-end",
          stroke: lineColours[line.key],
          width: line.width,
          dash: line.dash,
          points: loneRunPoints(lineColours[line.key]),
          value: function (u, v) { return fmtMs(v); },
        };
      }),
    );
    const options = {
      width: width(element),
      height: 280,
      tzDate: utcDate,
      series: series,
      bands: [{ series: [3, 1], fill: pw.cssVar("--band") }],
      axes: axes("end-to-end", fmtMs),
      scales: { y: { range: function (u, min, max) { return [0, Math.max(1, max * 1.05)]; } } },
      hooks: { draw: [alertMarkers(marks)] },
    };
    const data = [history.time].concat(QUANTILE_LINES.map(function (l) { return total[l.key] || []; }));
    return new uPlot(options, data, element);
  }

  // Heatmap ----------------------------------------------------------------------------------

  function heatCells(history, quantile) {
    const cells = new Map();
    const values = [];
    (history.time || []).forEach(function (t, i) {
      const v = (history.total[quantile] || [])[i];
      if (v == null) return;
      const day = Math.floor(t / DAY);
      const hour = Math.floor((t % DAY) / HOUR);
      cells.set(day + ":" + hour, { v: v, runs: (history.runs || [])[i] });
      values.push(v);
    });
    return { cells: cells, values: values.sort(function (a, b) { return a - b; }) };
  }

  function rampColour(fraction) {
    const position = Math.min(1, Math.max(0, fraction)) * (RAMP.length - 1);
    return RAMP[Math.round(position)];
  }

  function drawHeatmap(canvas, history, fromS, toS, quantile) {
    const firstDay = Math.floor(fromS / DAY);
    const days = Math.max(1, Math.floor(toS / DAY) - firstDay + 1);
    const heat = heatCells(history, quantile);
    const low = heat.values.length ? heat.values[0] : 0;
    // the 98th percentile as the top: one outlier must not wash out every busy hour
    const high = heat.values.length ? heat.values[Math.floor((heat.values.length - 1) * 0.98)] : 1;
    const cssWidth = Math.max(300, canvas.parentElement.clientWidth || 600);
    const left = 78, top = 18;
    const cellW = (cssWidth - left - 4) / 24;
    const cellH = Math.max(3, Math.min(18, 420 / days));
    const cssHeight = top + days * cellH + 4;
    const ratio = window.devicePixelRatio || 1;
    canvas.width = Math.round(cssWidth * ratio);
    canvas.height = Math.round(cssHeight * ratio);
    canvas.style.height = cssHeight + "px";
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, cssWidth, cssHeight);
    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = pw.cssVar("--chart-axis");
    ctx.textBaseline = "middle";
    for (let hour = 0; hour < 24; hour += 3) ctx.fillText(String(hour).padStart(2, "0") + "h", left + hour * cellW + 2, 8);
    const labelEvery = Math.max(1, Math.ceil(12 / cellH));
    const empty = pw.cssVar("--stripe");
    for (let d = 0; d < days; d++) {
      const y = top + d * cellH;
      if (d % labelEvery === 0) {
        const date = new Date((firstDay + d) * DAY * 1000);
        const label = date.toUTCString().slice(0, 3) + " " + date.toISOString().slice(5, 10);
        ctx.fillStyle = pw.cssVar("--chart-axis");
        ctx.fillText(label, 2, y + cellH / 2);
      }
      for (let hour = 0; hour < 24; hour++) {
        const cell = heat.cells.get(firstDay + d + ":" + hour);
        ctx.fillStyle = cell ? rampColour((cell.v - low) / ((high - low) || 1)) : empty;
        ctx.fillRect(left + hour * cellW, y, Math.max(1, cellW - 1), Math.max(1, cellH - (cellH > 6 ? 1 : 0)));
      }
    }
    canvas.dataset.cells = String(heat.cells.size);
    canvas.setAttribute("aria-label", heatSummary(heat, quantile));
    canvas.onmousemove = function (event) {
      const rect = canvas.getBoundingClientRect();
      const hour = Math.floor((event.clientX - rect.left - left) / cellW);
      const d = Math.floor((event.clientY - rect.top - top) / cellH);
      const cell = heat.cells.get(firstDay + d + ":" + hour);
      const date = new Date((firstDay + d) * DAY * 1000).toISOString().slice(0, 10);
      canvas.title = cell ? date + " " + String(hour).padStart(2, "0") + ":00 UTC: " + quantile + " " + fmtMs(cell.v) + (cell.runs != null ? " (" + cell.runs + " runs)" : "") : "";
    };
    return { low: low, high: high };
  }

  function heatSummary(heat, quantile) {
    const byHour = new Array(24).fill(null).map(function () { return []; });
    heat.cells.forEach(function (cell, key) { byHour[Number(key.split(":")[1])].push(cell.v); });
    let busiest = -1, worst = -Infinity;
    byHour.forEach(function (values, hour) {
      if (!values.length) return;
      const sorted = values.slice().sort(function (a, b) { return a - b; });
      const median = sorted[Math.floor(sorted.length / 2)];
      if (median > worst) { worst = median; busiest = hour; }
    });
    if (busiest < 0) return "Hour-of-day heatmap: no data";
    return "Hour-of-day heatmap of " + quantile + ": slowest hour " + String(busiest).padStart(2, "0") + ":00 UTC, typically " + fmtMs(worst);
  }


  // Compare: each target's end-to-end p50 on one chart, times aligned by uPlot.join ---------

  const TARGET_LINES = [
    { colour: "#0072B2", dash: [] },
    { colour: "#D55E00", dash: [6, 4] },
    { colour: "#009E73", dash: [2, 3] },
    { colour: "#CC79A7", dash: [8, 3, 2, 3] },
    { colour: "#E69F00", dash: [] },
    { colour: "#56B4E9", dash: [6, 4] },
  ];

  function CompareChart(element) {
    this.element = element;
    this.targets = element.dataset.targets.split(",").filter(Boolean);
    this.vantage = element.dataset.vantage || "";
    this.range = Number(element.dataset.rangeSeconds);
    this.now = clockOf(element);
    this.plots = {};
  }

  CompareChart.prototype.load = async function () {
    const toS = this.now();
    const self = this;
    try {
      this.histories = await Promise.all(
        this.targets.map(function (name) {
          return fetchHistory(historyUrl(name, self.vantage, toS - self.range, toS));
        }),
      );
      this.draw();
    } catch (error) {
      this.element.textContent = "Could not load the history: " + error.message;
    }
  };

  CompareChart.prototype.draw = function () {
    if (this.plots.compare) this.plots.compare.destroy();
    this.element.textContent = "";
    const tables = this.histories.map(function (h) { return [h.time, (h.total || {}).p50 || []]; });
    const data = uPlot.join(tables);
    const series = [{}].concat(
      this.targets.map(function (name, i) {
        const line = TARGET_LINES[i % TARGET_LINES.length];
        return {
          label: name + " p50",
          stroke: line.colour,
          dash: line.dash,
          width: 2,
          spanGaps: true,
          points: { show: false },
          value: function (u, v) { return fmtMs(v); },
        };
      }),
    );
    this.plots.compare = new uPlot(
      {
        width: width(this.element),
        height: 300,
        tzDate: utcDate,
        series: series,
        axes: axes("end-to-end p50", fmtMs),
        scales: { y: { range: function (u, min, max) { return [0, Math.max(1, max * 1.05)]; } } },
      },
      data,
      this.element,
    );
  };

  CompareChart.prototype.resize = function () {
    if (this.plots.compare) this.plots.compare.setSize({ width: width(this.element), height: 300 });
  };


  // Page wiring ------------------------------------------------------------------------------

  function TargetCharts(root) {
    this.root = root;
    this.target = root.dataset.target;
    this.vantage = root.dataset.vantage || "";
    this.range = Number(root.dataset.rangeSeconds);
    this.now = clockOf(root);
    this.mode = "ms";
    this.plots = {};
    this.marks = JSON.parse((document.getElementById("alert-marks") || { textContent: "[]" }).textContent);
  }

  TargetCharts.prototype.load = async function () {
    const toS = this.now();
    const fromS = toS - this.range;
    const heatFrom = toS - Math.min(HEAT_MAX_RANGE, Math.max(this.range, HEAT_MIN_RANGE));
    try {
      const results = await Promise.all([
        fetchHistory(historyUrl(this.target, this.vantage, fromS, toS)),
        fetchHistory(historyUrl(this.target, this.vantage, heatFrom, toS, HOUR)),
      ]);
      this.history = results[0];
      this.hourly = results[1];
      this.heatRange = [heatFrom, toS];
      this.draw();
    } catch (error) {
      this.root.querySelectorAll("[data-chart]").forEach(function (el) {
        el.textContent = "Could not load the history: " + error.message;
      });
    }
  };

  TargetCharts.prototype.draw = function () {
    Object.values(this.plots).forEach(function (plot) { plot.destroy(); });
    this.plots = {};
    const phases = this.root.querySelector("[data-chart=phases]");
    const total = this.root.querySelector("[data-chart=total]");
    const heatmap = this.root.querySelector("canvas[data-chart=heatmap]");
    const empty = !this.history.time || this.history.time.length === 0;
    this.root.querySelectorAll(".chart-empty").forEach(function (el) { el.hidden = !empty; });
    if (empty) return;
    phases.textContent = "";
    total.textContent = "";
    this.plots.phases = drawPhases(phases, this.history, this.mode, this.marks);
    this.plots.total = drawTotal(total, this.history, this.marks);
    if (heatmap) {
      const scale = drawHeatmap(heatmap, this.hourly, this.heatRange[0], this.heatRange[1], "p99");
      const legend = this.root.querySelector("[data-heat-scale]");
      if (legend) {
        const low = fmtMs(scale.low), high = fmtMs(scale.high);
        // One value (a flat history, one hour of data) is said once, not as a range of it.
        legend.textContent = (low === high ? "every hour " + low : low + " … " + high) + " (p99 per hour)";
      }
    }
  };

  TargetCharts.prototype.resize = function () {
    const self = this;
    Object.keys(this.plots).forEach(function (name) {
      const element = self.root.querySelector("[data-chart=" + name + "]");
      self.plots[name].setSize({ width: width(element), height: 280 });
    });
    const heatmap = this.root.querySelector("canvas[data-chart=heatmap]");
    if (heatmap && this.hourly) drawHeatmap(heatmap, this.hourly, this.heatRange[0], this.heatRange[1], "p99");
  };

  TargetCharts.prototype.setMode = function (mode) {
    this.mode = mode;
    this.root.querySelectorAll("[data-mode]").forEach(function (button) {
      button.setAttribute("aria-pressed", String(button.dataset.mode === mode));
    });
    if (this.history) this.draw();
  };

  function start() {
    const instances = [];
    document.querySelectorAll("[data-charts]").forEach(function (root) {
      const charts = new TargetCharts(root);
      root.querySelectorAll("[data-mode]").forEach(function (button) {
        button.addEventListener("click", function () { charts.setMode(button.dataset.mode); });
      });
      instances.push(charts);
      charts.load();
    });
    document.querySelectorAll("[data-compare]").forEach(function (element) {
      const chart = new CompareChart(element);
      instances.push(chart);
      chart.load();
    });
    if (!instances.length) return;
    let pending = null;
    window.addEventListener("resize", function () {
      clearTimeout(pending);
      pending = setTimeout(function () { instances.forEach(function (c) { c.resize(); }); }, 150);
    });
    document.addEventListener("phasewatch:theme", function () {
      instances.forEach(function (c) { if (c.history || c.histories) c.draw(); });
    });
    document.addEventListener("phasewatch:refresh", function () {
      instances.forEach(function (c) { c.load(); });
    });
    window.phasewatchCharts = instances;
  }

  // The setup other panels draw with (the what-if panel, whatif.js): the same axes and units.
  window.phasewatchChartKit = { fmtMs: fmtMs, axes: axes, width: width };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
