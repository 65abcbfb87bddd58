/* The live fleet page: one server-sent event per change carries the whole board. */
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const C = LoopCharts;

  function duration(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    if (seconds < 60) return `${seconds < 10 ? seconds.toFixed(1) : Math.round(seconds)} s`;
    if (seconds < 3600) return `${(seconds / 60).toFixed(1)} min`;
    return `${(seconds / 3600).toFixed(1)} h`;
  }

  function short(session) {
    return session.length > 34 ? "\u2026" + session.slice(-33) : session;
  }

  function render(s) {
    const t = s.totals;
    $("open-now").textContent = C.fmt(t.open);
    $("kpi-open").classList.toggle("none", t.open === 0);
    $("open-sub").textContent = t.open ? "sessions looping right now" : "no agent is looping";
    $("loops-total").textContent = C.fmt(t.loops);
    $("loops-sub").textContent = `${C.fmt(t.warnings)} warnings · ${C.fmt(t.closed)} closed`;
    const first = s.broken_first;
    $("first-share").textContent = first.closed ? `${Math.round((first.loops / first.closed) * 100)}%` : "–";
    $("first-sub").textContent = first.closed ? `${first.loops} of ${first.closed} closed loops` : "no closed loops yet";
    $("median-break").textContent = duration(s.time_to_break.median_seconds);
    const broken = s.outcomes.broken || 0;
    $("median-sub").textContent = `${broken} broken · ${s.outcomes.session_ended || 0} ended · ${s.outcomes.expired || 0} expired`;

    C.legend($("legend"), s.rules);
    C.stacked($("chart-per-minute"), s.per_minute.minutes, s.per_minute.series, { empty: "no loops in the last 30 minutes" });
    C.hbars($("chart-rules"), s.rules.map((r) => [r, s.by_rule[r]]), {
      colorOf: C.ruleColor, display: (r) => C.RULE_NAMES[r] || r, labelWidth: 120, empty: "no loops yet",
    });
    C.hbars($("chart-agents"), s.top_agents, { empty: "no looping agents" });
    C.hbars($("chart-tools"), s.top_tools, { empty: "no looping tools", colorOf: (_, i) => ["#60a5fa", "#22d3ee", "#34d399", "#a78bfa", "#f472b6", "#facc15", "#fb923c", "#f87171"][i % 8] });
    C.donut($("chart-first"), first.loops, first.closed, { empty: "no closed loops yet" });
    $("first-text").textContent = first.closed
      ? `${first.loops} of ${first.closed} closed loops were broken at the first model call that saw the warning: the agent read it and changed course.`
      : s.topics.episodes_found
        ? "Waiting for the first closed loop."
        : `No topic ${s.topics.episodes} yet: loops are counted from warnings, and close when the worker publishes episodes.`;
    C.columns($("chart-break"), s.time_to_break.labels, s.time_to_break.counts, { empty: "no broken loops yet" });

    C.loopList($("open-list"), s.open_loops.map((l) => ({
      color: C.ruleColor(l.rule), title: l.agent_id || "(no agent id)", subtitle: short(l.session_id),
      what: `${C.RULE_NAMES[l.rule] || l.rule} · ${l.tool_names.join(", ")}`,
      pill: "open", pillClass: "open", num: `×${l.peak_count}`,
    })), "no open loops");
    C.loopList($("recent-list"), s.recent.map((e) => ({
      color: C.ruleColor(e.rule), title: e.agent_id || "(no agent id)", subtitle: short(e.session_id),
      what: `${C.RULE_NAMES[e.rule] || e.rule} · ${e.tool_names.join(", ")}`,
      pill: e.outcome.replace("_", " "), pillClass: e.outcome, num: `×${e.peak_count} · ${duration(e.duration_seconds)}`,
    })), s.topics.episodes_found ? "no closed loops yet" : `waiting for ${s.topics.episodes}`);

    $("footer").textContent = `reading ${s.topics.warnings}${s.topics.episodes_found ? " and " + s.topics.episodes : ""}` +
      (s.latest ? ` · latest event ${new Date(s.latest).toLocaleTimeString()}` : "") +
      (t.skipped ? ` · ${t.skipped} undecodable records skipped` : "");
    document.body.dataset.loops = t.loops;
    document.body.dataset.warnings = t.warnings;
    document.body.dataset.episodes = t.episodes;
  }

  let last = null;
  let resizeTimer = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => last && render(last), 150);
  });

  function connect() {
    const status = $("status");
    const source = new EventSource("/events");
    source.onopen = () => { status.className = "status live"; $("status-text").textContent = "live"; };
    source.onmessage = (msg) => { last = JSON.parse(msg.data); render(last); };
    source.onerror = () => { status.className = "status down"; $("status-text").textContent = "reconnecting…"; };
  }

  connect();
})();
