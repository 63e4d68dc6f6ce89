// The dependency graph as SVG, with a small layered layout written for this page (values flow left
// to right: inputs in the first column, each computed one column right of the furthest thing it
// reads). For the graphs a live view shows (tens to a few hundred keys) this is enough:
//
// 1. Cycles: a depth-first walk from every node in name order; an edge that reaches a node still
//    on the walk's stack (a two-way binding, a cycle through a branch not taken) is laid out as if
//    reversed. It is still drawn the way it points.
// 2. Columns: longest path from the sources, in topological order (Kahn's algorithm).
// 3. Order within a column: by name, then eight sweeps that sort each column by the mean position
//    of its neighbours in the column before (even sweeps, left to right) or after (odd sweeps,
//    right to left), which removes most crossings. A node with no such neighbour keeps its place.
// 4. Positions: a column per layer, a row per node, every column centred on the tallest.
// 5. Edges: a cubic curve from the right side of the source to the left side of the target; a
//    binding is dashed.
'use strict';

const ObsGraph = (() => {
  const SVG = 'http://www.w3.org/2000/svg';
  const NODE_WIDTH = 190, NODE_HEIGHT = 40, COLUMN_GAP = 70, ROW_GAP = 14, MARGIN = 12;
  const LABEL_CHARS = 26;

  function layout(nodes, edges) {
    const names = nodes.map(n => n.key).sort();
    const out = new Map(names.map(k => [k, []]));
    const into = new Map(names.map(k => [k, []]));
    for (const e of edges) {
      if (out.has(e.from) && out.has(e.to) && e.from !== e.to) out.get(e.from).push(e.to);
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
    for (const [from, to] of forward) into.get(to).push(from);

    // 2. Columns.
    const layer = new Map(names.map(k => [k, 0]));
    const waiting = new Map(names.map(k => [k, into.get(k).length]));
    const successors = new Map(names.map(k => [k, []]));
    for (const [from, to] of forward) successors.get(from).push(to);
    const queue = names.filter(k => waiting.get(k) === 0);
    for (let i = 0; i < queue.length; i++) {
      const k = queue[i];
      for (const s of successors.get(k)) {
        layer.set(s, Math.max(layer.get(s), layer.get(k) + 1));
        waiting.set(s, waiting.get(s) - 1);
        if (waiting.get(s) === 0) queue.push(s);
      }
    }
    const columns = [];
    for (const k of names) (columns[layer.get(k)] ||= []).push(k);

    // 3. Crossing reduction.
    const position = new Map();
    const number = () => columns.forEach(c => c.forEach((k, i) => position.set(k, i)));
    number();
    for (let sweep = 0; sweep < 8; sweep++) {
      const down = sweep % 2 === 0;
      const order = down ? columns.map((_, i) => i).slice(1) : columns.map((_, i) => i).reverse().slice(1);
      for (const c of order) {
        const neighbours = down ? into : successors;
        const weight = new Map(columns[c].map(k => {
          const ns = neighbours.get(k).filter(n => layer.get(n) === c + (down ? -1 : 1));
          return [k, ns.length ? ns.reduce((s, n) => s + position.get(n), 0) / ns.length : position.get(k)];
        }));
        columns[c].sort((a, b) => weight.get(a) - weight.get(b));
        columns[c].forEach((k, i) => position.set(k, i));
      }
    }

    // 4. Positions.
    const tallest = Math.max(0, ...columns.map(c => c.length));
    const place = new Map();
    columns.forEach((column, c) => {
      const top = (tallest - column.length) * (NODE_HEIGHT + ROW_GAP) / 2;
      column.forEach((k, i) => place.set(k, {
        x: MARGIN + c * (NODE_WIDTH + COLUMN_GAP),
        y: MARGIN + top + i * (NODE_HEIGHT + ROW_GAP),
      }));
    });
    return {
      place,
      width: 2 * MARGIN + columns.length * NODE_WIDTH + Math.max(0, columns.length - 1) * COLUMN_GAP,
      height: 2 * MARGIN + tallest * NODE_HEIGHT + Math.max(0, tallest - 1) * ROW_GAP,
    };
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
    const { place, width, height } = layout(graph.nodes, graph.edges);
    svg.setAttribute('width', width);
    svg.setAttribute('height', height);
    svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
    const defs = element('defs', {}, svg);
    const marker = element('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5,
                                       markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, defs);
    element('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }, marker);

    const edgeLayer = element('g', { class: 'edges' }, svg);
    const nodeLayer = element('g', { class: 'nodes' }, svg);
    const edgesInto = new Map();
    for (const e of graph.edges) {
      const a = place.get(e.from), b = place.get(e.to);
      if (!a || !b) continue;
      const x1 = a.x + NODE_WIDTH, y1 = a.y + NODE_HEIGHT / 2, x2 = b.x, y2 = b.y + NODE_HEIGHT / 2;
      const bend = Math.max(40, Math.abs(x2 - x1) / 2);
      const path = element('path', {
        class: `edge ${e.type}`, 'data-from': e.from, 'data-to': e.to, 'data-type': e.type,
        d: `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`, 'marker-end': 'url(#arrow)',
      }, edgeLayer);
      (edgesInto.get(e.to) || edgesInto.set(e.to, []).get(e.to)).push({ from: e.from, path });
    }
    const nodes = new Map();
    for (const n of graph.nodes) {
      const p = place.get(n.key);
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

  return { draw, layout, shorten, LABEL_CHARS };
})();
