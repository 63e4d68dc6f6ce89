// The dependency graph as SVG, with a small layered layout written for this page (values flow left
// to right: inputs in the first column, each computed one column right of the furthest thing it
// reads). For the graphs a live view shows (tens to a few hundred keys) this is enough:
//
// 1. Cycles: a depth-first walk from every node in name order; an edge that reaches a node still
//    on the walk's stack (a two-way binding, a cycle through a branch not taken) is laid out as if
//    reversed. It is still drawn the way it points.
// 2. Columns: longest path from the sources, in topological order (Kahn's algorithm).
// 3. Long edges: an edge that spans several columns gets a waypoint in each column between, so
//    that it is routed around the nodes there instead of through them.
// 4. Order within a column: by name, then eight sweeps that sort each column by the mean position
//    of its neighbours in the column before (even sweeps, left to right) or after (odd sweeps,
//    right to left), which removes most crossings. A node with no such neighbour keeps its place.
// 5. Positions: a column per layer, nodes (and the smaller waypoints) stacked in order, every
//    column centred on the tallest.
// 6. Edges: smooth curves from the right side of the source, through its waypoints, to the left
//    side of the target; a binding is dashed.
'use strict';

const ObsGraph = (() => {
  const SVG = 'http://www.w3.org/2000/svg';
  const NODE_WIDTH = 170, NODE_HEIGHT = 40, WAYPOINT_HEIGHT = 12, COLUMN_GAP = 56, ROW_GAP = 14, MARGIN = 12;
  const LABEL_CHARS = 23;

  function layout(nodes, edges) {
    const names = nodes.map(n => n.key).sort();
    const out = new Map(names.map(k => [k, []]));
    for (const e of edges) {
      if (out.has(e.from) && out.has(e.to) && e.from !== e.to && !out.get(e.from).includes(e.to)) out.get(e.from).push(e.to);
    }
    for (const list of out.values()) list.sort();

    // 1. Back edges, found without recursion (a long chain must not overflow the stack).
    const state = new Map(); // 1: on the stack, 2: done
    const forward = []; // [from, to] pairs, all pointing forward
    for (const root of names) {
      if (state.has(root)) continue;
      const stack = [[root, 0]];
      state.set(root, 1);
      while (stack.length) {
        const top = stack[stack.length - 1];
        const next = out.get(top[0])[top[1]++];
        if (next === undefined) { state.set(top[0], 2); stack.pop(); continue; }
        if (state.get(next) === 1) { forward.push([next, top[0]]); continue; }
        forward.push([top[0], next]);
        if (!state.has(next)) { state.set(next, 1); stack.push([next, 0]); }
      }
    }

    // 2. Columns.
    const layer = new Map(names.map(k => [k, 0]));
    const waiting = new Map(names.map(k => [k, 0]));
    const successors = new Map(names.map(k => [k, []]));
    for (const [from, to] of forward) {
      successors.get(from).push(to);
      waiting.set(to, waiting.get(to) + 1);
    }
    const queue = names.filter(k => waiting.get(k) === 0);
    for (let i = 0; i < queue.length; i++) {
      const k = queue[i];
      for (const s of successors.get(k)) {
        layer.set(s, Math.max(layer.get(s), layer.get(k) + 1));
        waiting.set(s, waiting.get(s) - 1);
        if (waiting.get(s) === 0) queue.push(s);
      }
    }

    // 3. Waypoints: ids that cannot be key names (keys have no spaces).
    const next = new Map(names.map(k => [k, []]));
    const previous = new Map(names.map(k => [k, []]));
    const route = new Map(); // "from to" (laid-out direction) -> waypoints, left to right
    const link = (a, b) => { next.get(a).push(b); previous.get(b).push(a); };
    for (const [from, to] of forward) {
      const points = [];
      for (let l = layer.get(from) + 1; l < layer.get(to); l++) {
        const id = `${from} ${to} ${l}`;
        layer.set(id, l);
        next.set(id, []);
        previous.set(id, []);
        points.push(id);
      }
      [from, ...points, to].reduce((a, b) => { link(a, b); return b; });
      route.set(`${from} ${to}`, points);
    }
    const columns = [];
    for (const [k, l] of layer) (columns[l] ||= []).push(k);

    // 4. Crossing reduction.
    const position = new Map();
    columns.forEach(c => c.forEach((k, i) => position.set(k, i)));
    for (let sweep = 0; sweep < 8; sweep++) {
      const down = sweep % 2 === 0;
      const order = columns.map((_, i) => i);
      if (!down) order.reverse();
      for (const c of order.slice(1)) {
        const neighbours = down ? previous : next;
        const weight = new Map(columns[c].map(k => {
          const ns = neighbours.get(k);
          return [k, ns.length ? ns.reduce((s, n) => s + position.get(n), 0) / ns.length : position.get(k)];
        }));
        columns[c].sort((a, b) => weight.get(a) - weight.get(b));
        columns[c].forEach((k, i) => position.set(k, i));
      }
    }

    // 5. Positions.
    const isNode = k => out.has(k);
    const heightOf = k => (isNode(k) ? NODE_HEIGHT : WAYPOINT_HEIGHT);
    const columnHeight = c => c.reduce((h, k) => h + heightOf(k), 0) + Math.max(0, c.length - 1) * ROW_GAP;
    const tallest = Math.max(0, ...columns.map(columnHeight));
    const place = new Map();
    columns.forEach((column, c) => {
      let y = MARGIN + (tallest - columnHeight(column)) / 2;
      for (const k of column) {
        place.set(k, { x: MARGIN + c * (NODE_WIDTH + COLUMN_GAP), y, height: heightOf(k) });
        y += heightOf(k) + ROW_GAP;
      }
    });
    return {
      place,
      route,
      width: 2 * MARGIN + columns.length * NODE_WIDTH + Math.max(0, columns.length - 1) * COLUMN_GAP,
      height: 2 * MARGIN + tallest,
    };
  }

  // The path of an edge: right side of the source, the waypoints (each crossed left to right),
  // the left side of the target; reversed for an edge that was laid out backwards.
  function edgePath(from, to, layout) {
    const { place, route } = layout;
    let points = route.get(`${from} ${to}`);
    const reversed = !points;
    if (reversed) points = route.get(`${to} ${from}`) || [];
    const [left, right] = reversed ? [to, from] : [from, to];
    const a = place.get(left), b = place.get(right);
    const stops = [[a.x + NODE_WIDTH, a.y + a.height / 2]];
    for (const p of points.map(k => place.get(k))) {
      stops.push([p.x, p.y + p.height / 2], [p.x + NODE_WIDTH, p.y + p.height / 2]);
    }
    stops.push([b.x, b.y + b.height / 2]);
    if (reversed) stops.reverse();
    let d = `M${stops[0][0]},${stops[0][1]}`;
    for (let i = 1; i < stops.length; i++) {
      const [x1, y1] = stops[i - 1], [x2, y2] = stops[i];
      if (y1 === y2) { d += ` L${x2},${y2}`; continue; }
      const bend = (x2 - x1) / 2;
      d += ` C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`;
    }
    return d;
  }

  function element(name, attributes, parent) {
    const el = document.createElementNS(SVG, name);
    for (const [a, v] of Object.entries(attributes)) el.setAttribute(a, v);
    if (parent) parent.appendChild(el);
    return el;
  }

  function shorten(text, chars) {
    return text.length > chars ? text.slice(0, chars - 1) + '…' : text;
  }

  // Draws `graph` ({nodes, edges} as the daemon's `graph` answer) into `svg`; returns the
  // elements by key, for the page to update values and flash. `onSelect(key)` on a click.
  function draw(svg, graph, onSelect) {
    svg.replaceChildren();
    const laidOut = layout(graph.nodes, graph.edges);
    svg.setAttribute('width', laidOut.width);
    svg.setAttribute('height', laidOut.height);
    svg.setAttribute('viewBox', `0 0 ${laidOut.width} ${laidOut.height}`);
    const defs = element('defs', {}, svg);
    const marker = element('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5,
                                       markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, defs);
    element('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }, marker);

    const edgeLayer = element('g', { class: 'edges' }, svg);
    const nodeLayer = element('g', { class: 'nodes' }, svg);
    const edgesInto = new Map();
    for (const e of graph.edges) {
      if (!laidOut.place.has(e.from) || !laidOut.place.has(e.to) || e.from === e.to) continue;
      const path = element('path', {
        class: `edge ${e.type}`, 'data-from': e.from, 'data-to': e.to, 'data-type': e.type,
        d: edgePath(e.from, e.to, laidOut), 'marker-end': 'url(#arrow)',
      }, edgeLayer);
      if (!edgesInto.has(e.to)) edgesInto.set(e.to, []);
      edgesInto.get(e.to).push({ from: e.from, path });
    }
    const nodes = new Map();
    for (const n of graph.nodes) {
      const p = laidOut.place.get(n.key);
      const g = element('g', { class: `node ${n.kind}`, 'data-key': n.key, transform: `translate(${p.x},${p.y})` }, nodeLayer);
      element('title', {}, g).textContent = n.key;
      element('rect', { width: NODE_WIDTH, height: NODE_HEIGHT, rx: 6 }, g);
      element('text', { class: 'name', x: 9, y: 16 }, g).textContent = shorten(n.key, LABEL_CHARS);
      const value = element('text', { class: 'value', x: 9, y: 32 }, g);
      g.addEventListener('click', () => onSelect(n.key));
      nodes.set(n.key, { g, value, shown: null });
    }
    return { nodes, edgesInto };
  }

  return { draw, shorten, LABEL_CHARS };
})();
