/* The offline report: draws the numbers embedded in the page with the fleet page's charts. */
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const C = LoopCharts;
  const data = JSON.parse($("report-data").textContent);
  const t = data.totals;
  const pct = (a, b) => {
    const share = b ? Math.round((a / b) * 100) : 0;
    return a && !share ? "<1" : String(share);
  };
  const OUTCOMES = { broken: "broken (agent moved on)", session_ended: "session ended", expired: "still looping at the end" };

  function render() {
    $("files").textContent = data.files.join(" · ");
    $("sessions").textContent = C.fmt(t.sessions);
    $("sessions-sub").textContent = `${C.fmt(t.events)} events`;
    $("looping").textContent = C.fmt(t.sessions_with_loops);
    $("kpi-looping").classList.toggle("none", t.sessions_with_loops === 0);
    $("looping-sub").textContent = `${pct(t.sessions_with_loops, t.sessions)}% of sessions`;
    $("loops").textContent = C.fmt(t.loops);
    const repeats = data.repeats.counts.reduce((a, b) => a + b, 0);
    $("loops-sub").textContent = repeats ? `${(t.warnings / Math.max(t.loops, 1)).toFixed(1)} warnings per loop` : "none found";
    $("warnings").textContent = C.fmt(t.warnings);
    $("warnings-sub").textContent = t.skipped_lines ? `${t.skipped_lines} lines skipped` : "every line read";

    const rules = data.rules.filter((r) => data.by_rule[r]).map((r) => `${C.RULE_NAMES[r] || r} (${data.by_rule[r]})`);
    $("summary").textContent = t.loops
      ? `${t.loops} loops in ${t.sessions_with_loops} of ${t.sessions} sessions (${pct(t.sessions_with_loops, t.sessions)}%): ${rules.join(", ")}. ` +
        `Most loops: ${data.top_sessions[0].session_id} (${data.top_sessions[0].loops}). Top tool: ${data.by_tool[0][0]}.`
      : `No loops in ${t.sessions} sessions (${t.events} events).`;

    C.hbars($("chart-rules"), data.rules.map((r) => [r, data.by_rule[r]]), {
      colorOf: C.ruleColor, display: (r) => C.RULE_NAMES[r] || r, labelWidth: 120, empty: "no loops",
    });
    C.hbars($("chart-agents"), data.by_agent, { empty: "no loops", labelWidth: 120 });
    C.hbars($("chart-tools"), data.by_tool, { empty: "no loops", labelWidth: 120 });
    C.hbars($("chart-sessions"), data.top_sessions.map((s) => [s.session_id, s.loops]), {
      empty: "no session looped", labelWidth: 220, colorOf: () => "#fb7185",
    });
    C.columns($("chart-repeats"), data.repeats.labels, data.repeats.counts, { color: "#fbbf24", empty: "no loops" });
    C.columns($("chart-position"), data.start_position.labels, data.start_position.counts, { color: "#38bdf8", empty: "no loops" });
    C.hbars($("chart-outcomes"), Object.keys(OUTCOMES).map((o) => [OUTCOMES[o], data.outcomes[o] || 0]), {
      empty: "no loops", labelWidth: 180, colorOf: (_, i) => ["#34d399", "#94a3b8", "#fbbf24"][i],
    });
    C.loopList($("loop-list"), data.loop_list.map((e) => ({
      color: C.ruleColor(e.rule), title: e.session_id, subtitle: e.agent_id || "(no agent id)",
      what: `${C.RULE_NAMES[e.rule] || e.rule} · ${e.tool_names.join(", ")}`,
      pill: OUTCOMES[e.outcome] || e.outcome, pillClass: e.outcome,
      num: `seq ${e.first_seq}–${e.last_seq} · ×${e.peak_count}`,
    })), "no loops");
    if (data.loop_list.length < t.loops) {
      $("loop-list-hint").textContent = `(the first ${data.loop_list.length} of ${t.loops}, by session)`;
    }
    document.body.dataset.loops = t.loops;
  }

  render();
  let timer = null;
  window.addEventListener("resize", () => { clearTimeout(timer); timer = setTimeout(render, 150); });
})();
