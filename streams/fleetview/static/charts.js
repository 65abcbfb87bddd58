/* loopwatch charts: small SVG charts shared by the live fleet page and the offline report.
 * No dependencies, no network. Every bar carries data-label / data-value so tests (and
 * curious people) can read the numbers a chart holds straight from the DOM. */
"use strict";

const LoopCharts = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const RULE_COLORS = {
    repeated_failed_mutation: "#fb7185",
    repeated_result: "#fbbf24",
    repeated_read_range: "#38bdf8",
    repeated_batch: "#a78bfa",
  };
  const RULE_NAMES = {
    repeated_failed_mutation: "failed mutation",
    repeated_result: "same result",
    repeated_read_range: "re-read range",
    repeated_batch: "same batch",
  };
  const PALETTE = ["#34d399", "#60a5fa", "#f472b6", "#facc15", "#a78bfa", "#fb923c", "#22d3ee", "#f87171"];

  function el(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    if (parent) parent.appendChild(node);
    return node;
  }

  function text(parent, x, y, content, attrs) {
    const node = el("text", { x, y, ...(attrs || {}) }, parent);
    node.textContent = content;
    return node;
  }

  /* The container's drawn width, so text keeps its size whatever the card's width. */
  function widthOf(container, fallback) {
    return Math.max(Math.round(container.clientWidth || 0), 0) || fallback;
  }

  function svg(container, width, height) {
    container.replaceChildren();
    return el("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img", class: "chart-svg" }, container);
  }

  function empty(container, message) {
    container.replaceChildren();
    const note = document.createElement("div");
    note.className = "chart-empty";
    note.textContent = message || "nothing yet";
    container.appendChild(note);
  }

  function fmt(n) {
    if (n >= 10000) return (n / 1000).toFixed(0) + "k";
    if (n >= 1000) return (n / 1000).toFixed(1) + "k";
    return Number.isInteger(n) ? String(n) : n.toFixed(1);
  }

  function clip(label, max) {
    return label.length > max ? label.slice(0, max - 1) + "\u2026" : label;
  }

  function ruleColor(rule) {
    return RULE_COLORS[rule] || "#94a3b8";
  }

  /* Horizontal bars: rows = [[label, value], ...], largest first. */
  function hbars(container, rows, opts) {
    const o = { colorOf: (_, i) => PALETTE[i % PALETTE.length], labelWidth: 150, empty: null, ...(opts || {}) };
    container.dataset.total = rows.reduce((sum, row) => sum + row[1], 0);
    if (!rows.length || rows.every((row) => row[1] === 0)) return empty(container, o.empty);
    const rowHeight = 30, width = widthOf(container, 460), barArea = width - o.labelWidth - 48;
    const root = svg(container, width, rows.length * rowHeight + 4);
    const max = Math.max(...rows.map((row) => row[1]), 1);
    rows.forEach(([label, value], i) => {
      const y = i * rowHeight + 4;
      const shown = o.display ? o.display(label) : label;
      text(root, o.labelWidth - 10, y + 17, clip(shown, 24), { class: "axis-label", "text-anchor": "end" }).appendChild(
        el("title", {})
      ).textContent = label;
      el("rect", { x: o.labelWidth, y: y + 4, width: barArea, height: rowHeight - 12, rx: 5, class: "track" }, root);
      const bar = el("rect", {
        x: o.labelWidth, y: y + 4, width: Math.max((value / max) * barArea, value ? 3 : 0),
        height: rowHeight - 12, rx: 5, fill: o.colorOf(label, i), class: "bar",
        "data-label": label, "data-value": value,
      }, root);
      el("title", {}, bar).textContent = `${label}: ${value}`;
      text(root, o.labelWidth + Math.max((value / max) * barArea, 3) + 8, y + 18, fmt(value), { class: "value-label" });
    });
  }

  /* Stacked columns over a time axis: labels = ["12:01", ...], series = {name: [n, ...]}. */
  function stacked(container, labels, series, opts) {
    const o = { colorOf: ruleColor, empty: null, ...(opts || {}) };
    const names = Object.keys(series);
    const totals = labels.map((_, i) => names.reduce((sum, name) => sum + (series[name][i] || 0), 0));
    container.dataset.total = totals.reduce((a, b) => a + b, 0);
    if (!labels.length || totals.every((t) => t === 0)) return empty(container, o.empty);
    const width = widthOf(container, 620), height = 230, left = 34, bottom = 24, top = 10;
    const root = svg(container, width, height);
    const max = Math.max(...totals, 1);
    const step = niceStep(max);
    const top_ = Math.ceil(max / step) * step;
    const plotH = height - bottom - top, plotW = width - left - 6;
    for (let v = 0; v <= top_; v += step) {
      const y = top + plotH - (v / top_) * plotH;
      el("line", { x1: left, x2: width - 6, y1: y, y2: y, class: "grid" }, root);
      text(root, left - 6, y + 4, fmt(v), { class: "tick", "text-anchor": "end" });
    }
    const slot = plotW / labels.length, barW = Math.max(slot * 0.7, 2);
    labels.forEach((label, i) => {
      let y = top + plotH;
      const x = left + i * slot + (slot - barW) / 2;
      names.forEach((name) => {
        const value = series[name][i] || 0;
        if (!value) return;
        const h = (value / top_) * plotH;
        y -= h;
        const bar = el("rect", {
          x, y, width: barW, height: h, fill: o.colorOf(name), class: "bar",
          "data-label": `${label} ${name}`, "data-series": name, "data-value": value,
        }, root);
        el("title", {}, bar).textContent = `${label} ${RULE_NAMES[name] || name}: ${value}`;
      });
      const every = Math.ceil(labels.length / Math.max(Math.floor(width / 70), 2));
      if ((labels.length - 1 - i) % every === 0) {
        text(root, x + barW / 2, height - 6, label, { class: "tick", "text-anchor": "middle" });
      }
    });
  }

  /* Vertical columns: a histogram of counts per labelled bucket. */
  function columns(container, labels, values, opts) {
    const o = { color: "#34d399", empty: null, ...(opts || {}) };
    container.dataset.total = values.reduce((a, b) => a + b, 0);
    if (!values.length || values.every((v) => v === 0)) return empty(container, o.empty);
    const width = widthOf(container, 460), height = 200, bottom = 38, top = 18;
    const root = svg(container, width, height);
    const max = Math.max(...values, 1);
    const slot = width / labels.length, barW = slot * 0.68, plotH = height - bottom - top;
    labels.forEach((label, i) => {
      const h = (values[i] / max) * plotH;
      const x = i * slot + (slot - barW) / 2;
      el("rect", { x, y: top, width: barW, height: plotH, rx: 6, class: "track" }, root);
      const bar = el("rect", {
        x, y: top + plotH - h, width: barW, height: h, rx: 6, fill: o.color, class: "bar",
        "data-label": label, "data-value": values[i],
      }, root);
      el("title", {}, bar).textContent = `${label}: ${values[i]}`;
      if (values[i]) text(root, x + barW / 2, top + plotH - h - 5, fmt(values[i]), { class: "value-label", "text-anchor": "middle" });
      text(root, x + barW / 2, height - 20, label, { class: "tick", "text-anchor": "middle" });
    });
  }

  /* A ring: part of whole, the share in the middle. */
  function donut(container, part, whole, opts) {
    const o = { color: "#34d399", caption: "", empty: null, ...(opts || {}) };
    container.dataset.part = part;
    container.dataset.whole = whole;
    if (!whole) return empty(container, o.empty);
    const size = 200, r = 78, c = 2 * Math.PI * r;
    const root = svg(container, size, size);
    el("circle", { cx: size / 2, cy: size / 2, r, class: "ring-track", fill: "none", "stroke-width": 20 }, root);
    el("circle", {
      cx: size / 2, cy: size / 2, r, fill: "none", stroke: o.color, "stroke-width": 20, "stroke-linecap": "round",
      "stroke-dasharray": `${(part / whole) * c} ${c}`, transform: `rotate(-90 ${size / 2} ${size / 2})`,
      class: "ring bar", "data-label": "share", "data-value": part,
    }, root);
    text(root, size / 2, size / 2 + 6, `${Math.round((part / whole) * 100)}%`, { class: "ring-value", "text-anchor": "middle" });
    text(root, size / 2, size / 2 + 30, `${part} of ${whole}`, { class: "ring-caption", "text-anchor": "middle" });
  }

  function niceStep(max) {
    const raw = max / 4;
    const mag = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1))));
    for (const m of [1, 2, 5, 10]) if (raw <= m * mag) return Math.max(m * mag, 1);
    return 10 * mag;
  }

  /* A legend of rule colours. */
  function legend(container, rules) {
    container.replaceChildren();
    for (const rule of rules) {
      const item = document.createElement("span");
      item.className = "legend-item";
      const dot = document.createElement("i");
      dot.style.background = ruleColor(rule);
      item.append(dot, RULE_NAMES[rule] || rule);
      container.appendChild(item);
    }
  }

  /* A list of loops: items = [{color, title, subtitle, what, pill, pillClass, num}]. */
  function loopList(list, items, emptyText) {
    list.replaceChildren();
    list.dataset.count = items.length;
    if (!items.length) {
      const li = document.createElement("li");
      li.className = "chart-empty";
      li.style.display = "block";
      li.textContent = emptyText || "none";
      list.appendChild(li);
      return;
    }
    for (const item of items) {
      const li = document.createElement("li");
      li.dataset.title = item.title;
      const swatch = document.createElement("i");
      swatch.className = "swatch";
      swatch.style.background = item.color;
      const who = document.createElement("div");
      who.className = "who";
      const b = document.createElement("b");
      b.textContent = item.title;
      who.append(b);
      if (item.subtitle) {
        const span = document.createElement("span");
        span.textContent = " \u00b7 " + item.subtitle;
        who.append(span);
      }
      const what = document.createElement("div");
      what.className = "what";
      what.textContent = item.what || "";
      const pill = document.createElement("span");
      pill.className = "pill " + (item.pillClass || "");
      pill.textContent = item.pill || "";
      const num = document.createElement("span");
      num.className = "num";
      num.textContent = item.num || "";
      li.append(swatch, who, what, pill, num);
      list.appendChild(li);
    }
  }

  return { hbars, stacked, columns, donut, legend, loopList, ruleColor, RULE_NAMES, fmt };
})();
