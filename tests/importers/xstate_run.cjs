// Runs XState machine configs (JSON) in XState itself, event by event, for tests/importers/test_xstate_differential.py.
//
// stdin: a JSON list of cases {config, events}; stdout: one JSON list, per case the list of snapshots taken
// after the start and after each event: {nodes, value, status, context, log} where `nodes` are the paths of
// the active state nodes and `log` what the step's `xstate.log` actions wrote, in order (entry and exit
// actions log `enter:<path>` / `exit:<path>`, which is how the entry/exit order is compared). Actions and
// guards written as data (the JSON form the durastate importer reads) are turned into XState's own
// `log`, `assign`, `raise` and `stateIn` before the machine is created. A case that throws reports
// {error}.
"use strict";

const { createMachine, createActor, log, assign, raise, stateIn } = require("xstate");

function action(a) {
  if (a === null || typeof a !== "object") return a;
  switch (a.type.replace(/^xstate\./, "")) {
    case "log":
      return log(a.message);
    case "assign":
      return assign(a.assignment);
    case "raise":
      return raise(typeof a.event === "string" ? { type: a.event } : a.event);
    default:
      throw new Error(`no such data action ${a.type}`);
  }
}

function actions(spec) {
  return Array.isArray(spec) ? spec.map(action) : action(spec);
}

function transition(t) {
  if (t === null || typeof t !== "object" || Array.isArray(t)) return t;
  const out = { ...t };
  if (t.actions !== undefined) out.actions = actions(t.actions);
  if (t.guard && typeof t.guard === "object" && /stateIn$/.test(t.guard.type)) out.guard = stateIn(t.guard.stateValue);
  return out;
}

function transitions(spec) {
  return Array.isArray(spec) ? spec.map(transition) : transition(spec);
}

function state(node) {
  const out = { ...node };
  for (const key of ["entry", "exit"]) if (node[key] !== undefined) out[key] = actions(node[key]);
  if (node.on) out.on = Object.fromEntries(Object.entries(node.on).map(([e, t]) => [e, transitions(t)]));
  for (const key of ["always", "onDone"]) if (node[key] !== undefined) out[key] = transitions(node[key]);
  if (node.states) out.states = Object.fromEntries(Object.entries(node.states).map(([k, s]) => [k, state(s)]));
  return out;
}

function snapshot(actor, logs) {
  const snap = actor.getSnapshot();
  const nodes = snap._nodes.filter((n) => n.path.length > 0).map((n) => n.path.join(".")).sort();
  return { nodes, value: snap.value, status: snap.status, context: snap.context, log: logs.splice(0) };
}

function run(c) {
  const logs = [];
  // a cycle of eventless transitions or raised events throws instead of spinning forever
  const machine = createMachine({ ...state(c.config), options: { maxIterations: 1000 } });
  const actor = createActor(machine, { logger: (...args) => logs.push(args[args.length - 1]) });
  const out = [];
  actor.start();
  out.push(snapshot(actor, logs));
  for (const type of c.events) {
    actor.send({ type });
    out.push(snapshot(actor, logs));
  }
  actor.stop();
  return out;
}

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const results = JSON.parse(input).map((c) => {
    try {
      return run(c);
    } catch (e) {
      return { error: String(e && e.message ? e.message : e) };
    }
  });
  process.stdout.write(JSON.stringify(results));
});
