// The live view: one event stream from obsctl web (a watch on the pattern), applied to a model of
// the keys, drawn once per animation frame.
//
// Events change only the model (a Map of keys) and mark keys dirty; `render`, at most once a
// frame, redraws the rows, graph nodes and detail of the dirty keys. So a burst of thousands of
// events costs one redraw, not thousands. And only the rows on screen are redrawn: a row out of
// sight is marked stale and drawn when it scrolls into view, so a thousand keys changing a
// hundred times a second cost the few dozen rows one can see.
//
// Resuming: obsctl web resumes its watch by revision when the daemon comes back, and may send
// again the events of the last revision the page saw. Events are applied by key revision, so
// those are ignored. The snapshot a watch starts with (when it has no `since`), or sends after
// `compacted` or `overflow`, is the whole state up to its `synced`: keys it does not hold are gone.
'use strict';

(() => {
  const $ = id => document.getElementById(id);
  const VALUE_CHARS = 160;
  const HISTORY_ROWS = 50;
  const FLASH_MS = 300;
  const GRAPH_MIN_SCALE = 0.6;
  const GRAPH_MAX_NODES = 400;    // a larger graph is not drawn
  const KINDS_BY_KEY = 20;        // new keys whose kind is asked one by one, not by a list

  const model = {
    keys: new Map(),      // key -> {key, kind, value, error, rev, changedAt, changeRev, row, flash}
    order: [],            // keys in table order
    rev: 0,
    snapshot: null,       // keys seen in the snapshot being received
    deleted: { rev: -1, keys: new Set() }, // keys deleted at the newest revision (see resuming)
  };
  const view = {
    pattern: '**',
    selected: null,
    readOnly: true,
    connection: 'connecting',
    reason: '',
    version: '',
    stats: null,
    graph: null,          // what ObsGraph.draw returned
    graphText: '',        // the graph answer last drawn, to skip identical redraws
  };
  const dirty = new Set();
  const stale = new Set();        // keys whose row is out of sight and out of date
  const onScreen = new Set();     // keys whose row is in sight (or nearly)
  let frameRequested = false;
  const rowWatcher = new IntersectionObserver(changes => {
    for (const change of changes) {
      const key = change.target.dataset.key;
      if (!change.isIntersecting) { onScreen.delete(key); continue; }
      onScreen.add(key);
      if (stale.delete(key)) { dirty.add(key); requestFrame(); }
    }
  }, { root: document.getElementById('keys'), rootMargin: '300px 0px' });

  // ---- access ----
  //
  // The token comes with the URL obsctl web printed, in the fragment (`#token=…`, which the
  // browser sends to no server) or, in URLs printed by older versions, the query. The page keeps
  // it in sessionStorage, which belongs to this origin only (scheme, host and port: another
  // server on 127.0.0.1 cannot read it) and to this tab (it survives a reload, not the tab, and
  // is not written to disk), takes it out of the address bar and the history, and sends it in a
  // header with every request for data. No cookie: browsers send a cookie to every port of the
  // host, so another local user's server on 127.0.0.1 would receive it.
  const TOKEN_KEY = 'obsctl-web-token';
  let token = takeToken(null);

  // The token in the address bar (kept for later); else the one kept before; else `current`.
  function takeToken(current) {
    const given = new URLSearchParams(location.hash.slice(1)).get('token') || new URLSearchParams(location.search).get('token');
    let kept = null;
    try {
      if (given) sessionStorage.setItem(TOKEN_KEY, given);
      kept = sessionStorage.getItem(TOKEN_KEY);
    } catch {
      // Storage refused (a browser setting): the token lasts as long as the page.
    }
    if (given) history.replaceState(null, '', location.pathname);
    return given || kept || current;
  }

  // The URL with another token opened over this page (only its fragment differs, so the browser
  // does not load the page again): start afresh with it.
  window.addEventListener('hashchange', () => {
    const before = token;
    token = takeToken(token);
    if (token !== before) location.reload();
  });

  function authorized(headers = {}) {
    return token ? { ...headers, Authorization: `Bearer ${token}` } : headers;
  }

  // obsctl web refused the token (or there is none): the page can do nothing until it is opened
  // with the URL obsctl web printed.
  function forbidden() {
    closeStream();
    setConnection('forbidden');
  }

  // ---- the event stream ----
  //
  // Server-Sent Events read by fetch, since EventSource cannot send the token in a header: the
  // body is read as it comes, split into lines, and a blank line ends a message (`data:` lines,
  // joined by newlines; `retry:` sets the first reconnection delay; `:` starts a comment, the
  // server's keep-alive). When the connection to obsctl web ends, the page says so and connects
  // again with backoff (the `retry:` delay, doubling up to STREAM_MAX_RETRY_MS); the stream it
  // gets then starts with a snapshot, as a new page's would.
  const STREAM_MAX_RETRY_MS = 16000;
  let stream = null;              // the AbortController of the stream being read
  let streamRetryMs = 2000;       // from the server's `retry:`
  let streamBackoffMs = 0;
  let streamTimer = null;

  function closeStream() {
    if (stream) stream.abort();
    stream = null;
    clearTimeout(streamTimer);
  }

  function openStream() {
    closeStream();
    model.keys.clear();
    model.order = [];
    rowWatcher.disconnect();
    onScreen.clear();
    stale.clear();
    model.snapshot = null;
    $('rows').replaceChildren();
    setConnection('connecting');
    streamBackoffMs = 0;
    connectStream();
  }

  async function connectStream() {
    const controller = new AbortController();
    stream = controller;
    let response;
    try {
      response = await fetch('/events?pattern=' + encodeURIComponent(view.pattern),
                             { headers: authorized(), signal: controller.signal, cache: 'no-store' });
    } catch {
      return streamLost(controller);
    }
    if (stream !== controller) return;
    if (response.status === 403) return forbidden();
    if (!response.ok || !response.body) return streamLost(controller);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let text = '';
    let data = [];
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done || stream !== controller) break;
        streamBackoffMs = 0;
        text += decoder.decode(value, { stream: true });
        // Lines are taken by position and the rest kept once: a message of thousands of lines
        // costs its length, not its length times its lines.
        let start = 0, end;
        while ((end = text.indexOf('\n', start)) >= 0) {
          const line = text.slice(start, text[end - 1] === '\r' ? end - 1 : end);
          start = end + 1;
          if (line === '') {
            if (data.length) streamMessage(data.join('\n'));
            data = [];
            if (stream !== controller) break;
          } else if (line.startsWith('data:')) {
            data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
          } else if (line.startsWith('retry:')) {
            const ms = Number(line.slice(6).trim());
            if (Number.isInteger(ms) && ms > 0) streamRetryMs = ms;
          }
          // Anything else is a comment (`: keep-alive`) or a field this page does not use.
        }
        text = text.slice(start);
      }
    } catch {
      // The connection broke, or the page aborted it: see streamLost.
    }
    streamLost(controller);
  }

  function streamMessage(data) {
    for (const line of data.split('\n')) {
      let event;
      try { event = JSON.parse(line); } catch { continue; }
      apply(event);
    }
    requestFrame();
  }

  // The stream ended without the page ending it (obsctl web stopped, say): say so, and try again.
  function streamLost(controller) {
    if (stream !== controller) return;   // replaced (a new pattern) or ended on purpose
    controller.abort();
    setConnection('web-down');
    streamBackoffMs = streamBackoffMs ? Math.min(streamBackoffMs * 2, STREAM_MAX_RETRY_MS) : streamRetryMs;
    clearTimeout(streamTimer);
    streamTimer = setTimeout(() => { if (stream === controller) connectStream(); }, streamBackoffMs);
  }

  function apply(event) {
    switch (event.event) {
      case 'connected':
        view.version = event.version;
        if (event.reset) {
          // Another state (a daemon restarted with --memory): its snapshot follows.
          model.rev = 0;
          model.deleted = { rev: -1, keys: new Set() };
          // The selected key's recent changes were the old state's (their revisions come again).
          const history = $('history');
          if (history) history.tBodies[0].replaceChildren();
        }
        model.rev = Math.max(model.rev, event.rev || 0);
        // Without `since` the watch starts with a snapshot: the whole state, even if empty. The
        // graph is asked for once it is in (at `synced`), when the page knows how many keys match.
        if (event.since === undefined) model.snapshot = new Set(); else refreshGraph();
        setConnection('live');
        refreshStats();
        break;
      case 'disconnected':
        setConnection('daemon-down', event.reason);
        break;
      case 'refused':
        closeStream();
        setConnection('refused', `${event.error.code}: ${event.error.message}`);
        break;
      case 'initial':
        if (!model.snapshot) model.snapshot = new Set();
        model.snapshot.add(event.key);
        put(event.key, event.kind, 'value' in event ? { value: event.value } : { error: event.error }, event.rev, false);
        break;
      case 'compacted':
      case 'overflow':
        model.snapshot = new Set();
        break;
      case 'synced':
        if (model.snapshot) {
          for (const key of [...model.keys.keys()]) if (!model.snapshot.has(key)) remove(key, event.rev);
          model.snapshot = null;
          if (model.order.some(k => !model.keys.get(k).kind)) refreshKinds();
          refreshGraph();
        }
        advance(event.rev);
        break;
      case 'change':
        if (seen(event)) break;
        put(event.key, null, { value: event.new }, event.rev, true);
        if (event.created) { refreshKinds(); refreshGraph(); }
        advance(event.rev);
        break;
      case 'error':
        if (seen(event)) break;
        put(event.key, 'computed', { error: event.error }, event.rev, true);
        advance(event.rev);
        break;
      case 'delete':
        if (seen(event)) break;
        if (model.deleted.rev !== event.rev) model.deleted = { rev: event.rev, keys: new Set() };
        model.deleted.keys.add(event.key);
        remove(event.key, event.rev);
        refreshGraph();
        advance(event.rev);
        break;
    }
  }

  // Whether the page already has this change: a resumed stream may repeat the last revision.
  function seen(event) {
    const entry = model.keys.get(event.key);
    if (entry && entry.rev >= event.rev) return true;
    return model.deleted.rev === event.rev && model.deleted.keys.has(event.key);
  }

  function advance(rev) {
    if (rev > model.rev) model.rev = rev;
  }

  function put(key, kind, content, rev, changed) {
    let entry = model.keys.get(key);
    if (!entry) {
      entry = { key, kind: null, value: undefined, error: undefined, rev: 0, changedAt: null, changeRev: 0, row: null, flash: false };
      model.keys.set(key, entry);
      insertInOrder(key);
    } else if (!changed && entry.rev !== rev) {
      // A snapshot after a gap: the key changed while the page was not told.
      changed = true;
    }
    if (kind) entry.kind = kind;
    entry.value = content.value;
    entry.error = content.error;
    if (changed) {
      entry.changedAt = Date.now();
      entry.changeRev = rev;
      entry.flash = true;
      if (view.selected === key) appendHistory({ event: content.error ? 'error' : 'change', key, rev, new: content.value, error: content.error });
    }
    entry.rev = rev;
    dirty.add(key);
  }

  function remove(key, rev) {
    const entry = model.keys.get(key);
    if (!entry) return;
    model.keys.delete(key);
    const index = lowerBound(model.order, key);
    if (model.order[index] === key) model.order.splice(index, 1);
    if (entry.row) {
      rowWatcher.unobserve(entry.row);
      entry.row.remove();
    }
    onScreen.delete(key);
    stale.delete(key);
    if (view.selected === key) appendHistory({ event: 'delete', key, rev });
    dirty.add(key);
  }

  function lowerBound(list, key) {
    let low = 0, high = list.length;
    while (low < high) {
      const mid = (low + high) >> 1;
      if (list[mid] < key) low = mid + 1; else high = mid;
    }
    return low;
  }

  function insertInOrder(key) {
    model.order.splice(lowerBound(model.order, key), 0, key);
  }

  // ---- drawing, once per frame ----

  function requestFrame() {
    if (frameRequested) return;
    frameRequested = true;
    requestAnimationFrame(render);
  }

  function render() {
    frameRequested = false;
    renderHeader();
    const created = [];
    for (const key of dirty) {
      const entry = model.keys.get(key);
      if (entry && !entry.row) {
        created.push(entry);
        renderRow(entry);
      } else if (entry && onScreen.has(key)) {
        renderRow(entry);
      } else if (entry) {
        stale.add(key);
      }
      renderNode(key, entry);
      if (key === view.selected) renderSelectedValue(entry);
      if (entry) entry.flash = false;
    }
    dirty.clear();
    placeRows(created);
  }

  // New rows go in key order: one by one when they are few, else the whole body is put in order
  // at once (a snapshot of thousands of keys), which moves each row once.
  function placeRows(created) {
    const rows = $('rows');
    if (created.length > 32) {
      const fragment = document.createDocumentFragment();
      for (const key of model.order) fragment.appendChild(model.keys.get(key).row);
      rows.appendChild(fragment);
      return;
    }
    created.sort((a, b) => (a.key < b.key ? -1 : 1));
    for (const entry of created) {
      let next = null;
      for (let i = lowerBound(model.order, entry.key) + 1; i < model.order.length && !next; i++) {
        const row = model.keys.get(model.order[i]).row;
        if (row && row.isConnected) next = row;
      }
      rows.insertBefore(entry.row, next);
    }
  }

  function renderHeader() {
    setText($('version'), view.version ? `v${view.version}` : '');
    setText($('rev'), `rev ${model.rev}`);
    setText($('count'), `${model.keys.size} key${model.keys.size === 1 ? '' : 's'}`);
  }

  // Writing an element's text, even the same text, makes the browser lay it out again.
  function setText(element, text) {
    if (element.textContent !== text) element.textContent = text;
  }

  function display(entry) {
    if (entry.error) return `${entry.error.code}: ${entry.error.message}`;
    return entry.value === undefined ? '' : JSON.stringify(entry.value);
  }

  function shorten(text, chars) {
    return text.length > chars ? text.slice(0, chars - 1) + '…' : text;
  }

  function renderRow(entry) {
    if (!entry.row) {
      const row = document.createElement('div');
      row.className = 'row';
      row.setAttribute('role', 'row');
      row.dataset.key = entry.key;
      for (const name of ['key', 'kind', 'value', 'rev num', 'ago num']) {
        const cell = document.createElement('span');
        cell.className = name;
        cell.setAttribute('role', 'cell');
        row.appendChild(cell);
      }
      row.children[0].textContent = entry.key;
      row.children[0].title = entry.key;
      if (entry.key === view.selected) row.classList.add('selected');
      entry.row = row;
      rowWatcher.observe(row);
    }
    // Only the cells whose text changed are written (see setText).
    const texts = [entry.kind || '', shorten(display(entry), VALUE_CHARS), String(entry.rev), ago(entry.changedAt)];
    const shown = entry.shown || (entry.shown = ['', '', '', '']);
    for (let i = 0; i < texts.length; i++) {
      if (shown[i] !== texts[i]) { entry.row.children[i + 1].textContent = texts[i]; shown[i] = texts[i]; }
    }
    if (!!entry.error !== entry.row.children[2].classList.contains('error')) entry.row.children[2].classList.toggle('error');
    if (entry.flash) flash(entry.row);
  }

  // Restarts the highlight by switching between two identical animations (changing the
  // animation's name restarts it, without forcing a layout). A key that changes all the time
  // is restarted at most every FLASH_MS: it stays lit, at little cost.
  function flash(element) {
    const now = performance.now();
    if (now - (element.flashedAt || -Infinity) < FLASH_MS) return;
    element.flashedAt = now;
    const a = element.classList.contains('flash-a');
    element.classList.toggle('flash-a', !a);
    element.classList.toggle('flash-b', a);
  }

  function ago(time) {
    if (time === null) return '–';
    const seconds = Math.max(0, Math.round((Date.now() - time) / 1000));
    if (seconds < 60) return `${seconds}s`;
    if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
    if (seconds < 86400) return `${Math.floor(seconds / 3600)}h`;
    return `${Math.floor(seconds / 86400)}d`;
  }

  function renderAges() {
    for (const key of onScreen) {
      const entry = model.keys.get(key);
      if (!entry || entry.changedAt === null) continue;
      const text = ago(entry.changedAt);
      if (entry.shown[3] !== text) { entry.row.children[4].textContent = text; entry.shown[3] = text; }
    }
  }

  function setConnection(state, reason = '') {
    view.connection = state;
    view.reason = reason;
    document.body.dataset.connection = state;
    const labels = { connecting: 'connecting', live: 'live', 'daemon-down': 'disconnected', 'web-down': 'no obsctl web', refused: 'refused',
                     forbidden: 'no access' };
    $('state').textContent = labels[state];
    const banner = $('banner');
    const messages = {
      'daemon-down': `Lost the connection to obsd (${reason}). Reconnecting… the page resumes from revision ${model.rev} when the daemon is back; until then what it shows may be out of date.`,
      'web-down': 'Cannot reach obsctl web: is it still running? The page retries by itself; a restarted obsctl web prints a new URL.',
      refused: `The daemon refused to watch "${view.pattern}": ${reason}`,
      forbidden: 'This page has no valid access token. Open the URL that obsctl web printed: it carries the token (a restarted obsctl web prints a new one).',
    };
    banner.hidden = !messages[state];
    banner.textContent = messages[state] || '';
    requestFrame();
  }

  // ---- requests ----

  async function api(request) {
    let response;
    try {
      response = await fetch('/api', { method: 'POST', headers: authorized({ 'Content-Type': 'application/json' }), body: JSON.stringify(request) });
    } catch (error) {
      return { ok: false, error: { code: 'no_web', message: 'cannot reach obsctl web' } };
    }
    let answer;
    try {
      answer = await response.json();
    } catch {
      return { ok: false, error: { code: 'http', message: `HTTP ${response.status}` } };
    }
    if (response.status === 403 && answer.error && answer.error.code === 'unauthorized') forbidden();
    return answer;
  }

  async function refreshStats() {
    if (view.connection !== 'live') return;
    const stats = await api({ op: 'stats' });
    if (!stats.ok) return;
    const shown = [['keys', stats.keys], ['computed', stats.computed], ['bindings', stats.bindings],
                   ['connections', stats.connections], ['watches', stats.watches],
                   ['events sent', stats.events_sent], ['up', ago(Date.now() - stats.uptime_s * 1000)],
                   ['durability', stats.durability]];
    const list = $('stats');
    list.replaceChildren();
    for (const [name, value] of shown) {
      if (value === undefined) continue;
      const term = document.createElement('dt');
      term.textContent = name;
      const data = document.createElement('dd');
      data.textContent = value;
      list.append(term, data);
    }
  }

  // The kinds of keys the page learnt of by a change event (which carries none): asked key by key
  // when they are few, since a `list` of the pattern, over a large store, costs the daemon time
  // every client waits for.
  let kindsTimer = null;
  function refreshKinds() {
    clearTimeout(kindsTimer);
    kindsTimer = setTimeout(async () => {
      const unknown = model.order.filter(k => !model.keys.get(k).kind);
      let answer;
      if (unknown.length <= KINDS_BY_KEY) {
        const described = await Promise.all(unknown.map(key => api({ op: 'describe', key })));
        answer = { ok: true, keys: described.filter(d => d.ok).map(d => ({ key: d.key, kind: d.kind })) };
      } else {
        answer = await api({ op: 'list', pattern: view.pattern });
      }
      if (!answer.ok) return;
      for (const item of answer.keys) {
        const entry = model.keys.get(item.key);
        if (entry && entry.kind !== item.kind) { entry.kind = item.kind; dirty.add(item.key); }
      }
      requestFrame();
    }, 150);
  }

  let graphTimer = null;
  function refreshGraph() {
    clearTimeout(graphTimer);
    graphTimer = setTimeout(loadGraph, 150);
  }

  // A graph has a node for every key that matches the pattern: when the page holds more than are
  // drawn, the daemon is not asked (its answer, over a large store, costs it time every client
  // waits for, and would not be drawn).
  async function loadGraph() {
    if (model.keys.size > GRAPH_MAX_NODES) return tooLargeToDraw(model.keys.size);
    const answer = await api({ op: 'graph', pattern: view.pattern });
    if (!answer.ok) return;
    const text = JSON.stringify([answer.nodes, answer.edges]);
    if (text === view.graphText) return;
    if (answer.nodes.length > GRAPH_MAX_NODES) return tooLargeToDraw(answer.nodes.length);
    view.graphText = text;
    const note = $('graph-note');
    const svg = $('graph-svg');
    note.textContent = answer.nodes.length ? '' : 'No keys match the pattern.';
    view.graph = ObsGraph.draw(svg, answer, select);
    fitGraph();
    for (const key of view.graph.nodes.keys()) renderNode(key, model.keys.get(key));
    if (view.selected) markSelected(view.selected);
  }

  function tooLargeToDraw(count) {
    $('graph-svg').replaceChildren();
    view.graph = null;
    view.graphText = '';
    $('graph-note').textContent = `${count} keys: narrow the pattern to draw the graph.`;
  }

  // A graph wider than its pane is scaled down to fit, but not below GRAPH_MIN_SCALE (the names
  // must stay readable): past that the pane scrolls.
  function fitGraph() {
    const svg = $('graph-svg');
    const width = Number(svg.getAttribute('width')), height = Number(svg.getAttribute('height'));
    if (!width) return;
    const scale = Math.min(1, Math.max(GRAPH_MIN_SCALE, ($('graph').clientWidth - 4) / width));
    svg.style.width = `${width * scale}px`;
    svg.style.height = `${height * scale}px`;
  }

  function renderNode(key, entry) {
    const node = view.graph && view.graph.nodes.get(key);
    if (!node) return;
    const text = entry ? ObsGraph.shorten(display(entry), ObsGraph.LABEL_CHARS) : '';
    if (node.shown !== text) { node.value.textContent = text; node.shown = text; }
    node.g.classList.toggle('failing', !!(entry && entry.error));
    if (!entry || !entry.flash) return;
    flash(node.g);
    // An edge lights up when both its ends changed in the same revision: the path of a change.
    for (const edge of view.graph.edgesInto.get(key) || []) {
      const from = model.keys.get(edge.from);
      if (from && from.changeRev === entry.changeRev) flash(edge.path);
    }
  }

  // ---- one key ----

  async function select(key) {
    view.selected = key;
    markSelected(key);
    const detail = $('detail');
    const [described, history] = await Promise.all([api({ op: 'describe', key }), api({ op: 'history', key })]);
    if (view.selected !== key) return;
    detail.replaceChildren();
    const title = document.createElement('h2');
    title.textContent = key;
    detail.appendChild(title);
    if (!described.ok) {
      detail.appendChild(paragraph(`${described.error.code}: ${described.error.message}`, 'error'));
      return;
    }
    detail.appendChild(describeList(described));
    const value = document.createElement('pre');
    value.id = 'detail-value';
    detail.appendChild(value);
    if (described.kind === 'value') detail.appendChild(editor(key));
    const heading = document.createElement('h3');
    heading.textContent = 'Recent changes';
    const table = document.createElement('table');
    table.id = 'history';
    table.appendChild(document.createElement('tbody'));
    detail.append(heading, table);
    for (const event of (history.ok ? history.events : [])) appendHistory(event);
    renderSelectedValue(model.keys.get(key));
  }

  function markSelected(key) {
    for (const row of document.querySelectorAll('#rows .row.selected, g.node.selected')) row.classList.remove('selected');
    const entry = model.keys.get(key);
    if (entry && entry.row) entry.row.classList.add('selected');
    const node = view.graph && view.graph.nodes.get(key);
    if (node) node.g.classList.add('selected');
  }

  function paragraph(text, className) {
    const p = document.createElement('p');
    p.textContent = text;
    if (className) p.className = className;
    return p;
  }

  function keyLink(key) {
    const a = document.createElement('a');
    a.href = '#';
    a.textContent = key;
    a.addEventListener('click', event => { event.preventDefault(); select(key); });
    return a;
  }

  function describeList(d) {
    const list = document.createElement('dl');
    const add = (name, content) => {
      const term = document.createElement('dt');
      term.textContent = name;
      const data = document.createElement('dd');
      if (typeof content === 'string') data.textContent = content; else data.append(...content);
      list.append(term, data);
    };
    const links = keys => keys.length ? keys.flatMap((k, i) => i ? [', ', keyLink(k)] : [keyLink(k)]) : '–';
    add('kind', d.kind);
    if (d.expr !== undefined) add('expr', d.expr);
    add('deps', links(d.deps || []));
    add('dependents', links(d.dependents || []));
    if (d.binding) {
      const parts = [keyLink(d.binding.from)];
      if (d.binding.two_way) parts.push(' (two-way)');
      if (d.binding.map) parts.push(` map ${d.binding.map}`);
      if (d.binding.unmap) parts.push(` unmap ${d.binding.unmap}`);
      add('binding', parts);
    }
    add('rev', String(d.rev));
    add('created_rev', String(d.created_rev));
    add('version', String(d.version));
    if (d.ttl_ms !== undefined) add('ttl', `${(d.ttl_ms / 1000).toFixed(1)} s left`);
    if (d.ephemeral) add('ephemeral', 'yes');
    return list;
  }

  function renderSelectedValue(entry) {
    const pre = $('detail-value');
    if (!pre) return;
    pre.className = entry && entry.error ? 'error' : '';
    pre.textContent = !entry ? '(deleted)' : entry.error ? `${entry.error.code}: ${entry.error.message}`
      : JSON.stringify(entry.value, null, 2);
    const area = $('edit-value');
    if (area && entry && !area.dataset.edited) {
      area.value = JSON.stringify(entry.value, null, 2);
      area.dataset.rev = entry.rev;
    }
  }

  function editor(key) {
    const box = document.createElement('div');
    box.id = 'editor';
    if (view.readOnly) {
      box.appendChild(paragraph('Read-only: obsctl web was started with --read-only.', 'hint'));
      return box;
    }
    const area = document.createElement('textarea');
    area.id = 'edit-value';
    area.spellcheck = false;
    area.rows = 4;
    const save = document.createElement('button');
    save.id = 'save';
    save.textContent = 'Set';
    const status = paragraph('', 'status');
    status.id = 'edit-status';
    const validate = () => {
      try {
        JSON.parse(area.value);
        save.disabled = false;
        status.textContent = '';
        status.className = 'status';
        return true;
      } catch (error) {
        save.disabled = true;
        status.textContent = `Not JSON: ${error.message}`;
        status.className = 'status error';
        return false;
      }
    };
    area.addEventListener('input', () => { area.dataset.edited = 'yes'; validate(); });
    save.addEventListener('click', async () => {
      if (!validate()) return;
      save.disabled = true;
      const answer = await api({ op: 'set', key, value: JSON.parse(area.value), if_rev: Number(area.dataset.rev) });
      save.disabled = false;
      if (answer.ok) {
        delete area.dataset.edited;
        status.textContent = answer.changed ? `Set at revision ${answer.rev}.` : 'Unchanged.';
        status.className = 'status ok';
      } else if (answer.error.code === 'conflict') {
        area.dataset.rev = answer.error.rev;
        status.textContent = `The key changed meanwhile (now revision ${answer.error.rev}); Set again to overwrite it.`;
        status.className = 'status error';
      } else {
        status.textContent = `${answer.error.code}: ${answer.error.message}`;
        status.className = 'status error';
      }
    });
    box.append(area, save, status);
    return box;
  }

  function appendHistory(event) {
    const table = $('history');
    if (!table) return;
    const body = table.tBodies[0];
    if ([...body.rows].some(row => row.dataset.rev === String(event.rev) && row.dataset.event === event.event)) return;
    const row = body.insertRow(0);
    row.dataset.rev = event.rev;
    row.dataset.event = event.event;
    const text = event.event === 'delete' ? '(deleted)' : event.error ? `${event.error.code}: ${event.error.message}`
      : shorten(JSON.stringify(event.new), VALUE_CHARS);
    for (const [content, name] of [[`rev ${event.rev}`, 'num'], [event.event, ''], [text, event.error ? 'error' : '']]) {
      const cell = row.insertCell();
      cell.textContent = content;
      cell.className = name;
    }
    while (body.rows.length > HISTORY_ROWS) body.deleteRow(-1);
  }

  // ---- start ----

  async function start() {
    if (!token) return forbidden();
    try {
      const response = await fetch('/info', { headers: authorized() });
      if (response.status === 403) return forbidden();
      view.readOnly = !!(await response.json()).read_only;
    } catch {
      view.readOnly = true;
    }
    $('readonly').hidden = !view.readOnly;
    const input = $('pattern');
    input.addEventListener('keydown', event => {
      if (event.key !== 'Enter') return;
      view.pattern = input.value.trim() || '**';
      view.graphText = '';
      openStream();
    });
    $('rows').addEventListener('click', event => {
      const row = event.target.closest('.row');
      if (row) select(row.dataset.key);
    });
    openStream();
    window.addEventListener('resize', fitGraph);
    setInterval(renderAges, 1000);
    setInterval(refreshStats, 2000);
    // Definitions and bindings change the graph without changing a value: look again now and then.
    setInterval(() => { if (view.connection === 'live') loadGraph(); }, 5000);
  }

  start();
})();
