// The device map: a snapshot and then updates from the server-sent
// events at ./events; each update replaces the rows of the nodes that
// changed, so the page never reloads.
(function () {
  "use strict";
  var STATES = [
    ["free", "free"],
    ["allocated", "allocated"],
    ["shared", "shared (consumable capacity)"],
    ["partition", "partition in use"],
    ["admin-access", "admin access"],
    ["tainted-noschedule", "tainted NoSchedule"],
    ["tainted-noexecute", "tainted NoExecute"]
  ];
  var grid = document.getElementById("grid");
  var details = document.getElementById("details");
  var statusEl = document.getElementById("status");
  var rows = {};      // node -> element
  var devices = {};   // device id -> device
  var selected = null;
  var updates = 0;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  var legend = document.getElementById("legend");
  var counters = {};
  STATES.forEach(function (s) {
    var item = el("span");
    var sw = el("span", "swatch");
    sw.setAttribute("data-state", s[0]);
    var count = el("b", "", "0");
    count.id = "count-" + s[0];
    counters[s[0]] = count;
    item.appendChild(sw);
    item.appendChild(document.createTextNode(s[1] + ": "));
    item.appendChild(count);
    legend.appendChild(item);
  });

  function recount() {
    var n = {};
    STATES.forEach(function (s) { n[s[0]] = 0; });
    for (var id in devices) n[devices[id].state] = (n[devices[id].state] || 0) + 1;
    STATES.forEach(function (s) { counters[s[0]].textContent = n[s[0]]; });
  }

  function renderRow(row) {
    var div = el("div", "node");
    div.setAttribute("data-node", row.node);
    var name = el("span", "name", row.node);
    name.title = row.node;
    div.appendChild(name);
    var devs = el("span", "devs");
    (row.devices || []).forEach(function (d) {
      devices[d.id] = d;
      var c = el("span", "dev");
      c.setAttribute("data-id", d.id);
      c.setAttribute("data-state", d.state);
      c.title = d.name + ": " + d.state;
      if (selected === d.id) c.classList.add("selected");
      devs.appendChild(c);
    });
    div.appendChild(devs);
    return div;
  }

  function forgetRow(node) {
    var old = rows[node];
    if (!old) return;
    old.querySelectorAll(".dev").forEach(function (c) { delete devices[c.getAttribute("data-id")]; });
  }

  function setRow(row) {
    forgetRow(row.node);
    var div = renderRow(row);
    var old = rows[row.node];
    rows[row.node] = div;
    if (old) { grid.replaceChild(div, old); return; }
    // Keep the nodes sorted by name.
    var next = null;
    for (var i = 0; i < grid.children.length; i++) {
      if (grid.children[i].getAttribute("data-node") > row.node) { next = grid.children[i]; break; }
    }
    grid.insertBefore(div, next);
  }

  function removeRow(node) {
    forgetRow(node);
    if (rows[node]) grid.removeChild(rows[node]);
    delete rows[node];
  }

  function show(id) {
    var d = devices[id];
    details.textContent = "";
    details.appendChild(el("h2", "", "Device"));
    if (!d) { details.appendChild(el("p", "hint", "Hover or click a device.")); return; }
    var dl = el("dl");
    function add(k, v) { dl.appendChild(el("dt", "", k)); dl.appendChild(el("dd", "", v)); }
    add("device", d.id);
    add("state", d.state);
    (d.taints || []).forEach(function (t) { add("taint", t); });
    (d.claims || []).forEach(function (c) {
      add(c.adminAccess ? "claim (admin)" : "claim", c.name);
      add("pods", (c.pods && c.pods.length) ? c.pods.join(", ") : "(none reserved)");
    });
    if (d.partition) add("partition of", d.partition.join(", "));
    details.appendChild(dl);
  }

  grid.addEventListener("mouseover", function (e) {
    var id = e.target.getAttribute && e.target.getAttribute("data-id");
    if (id && selected === null) show(id);
  });
  grid.addEventListener("click", function (e) {
    var id = e.target.getAttribute && e.target.getAttribute("data-id");
    if (!id) return;
    var prev = grid.querySelector(".dev.selected");
    if (prev) prev.classList.remove("selected");
    selected = selected === id ? null : id;
    if (selected) e.target.classList.add("selected");
    show(id);
  });

  function setPending(p) {
    var body = document.querySelector("#pending tbody");
    body.textContent = "";
    document.getElementById("pending-total").textContent = p.total;
    (p.pods || []).forEach(function (x) {
      var tr = el("tr");
      tr.appendChild(el("td", "", x.pod));
      tr.appendChild(el("td", "", x.reason));
      tr.appendChild(el("td", "", x.message));
      body.appendChild(tr);
    });
  }

  function setClasses(list) {
    var body = document.querySelector("#classes tbody");
    body.textContent = "";
    list.forEach(function (c) {
      var tr = el("tr");
      tr.setAttribute("data-class", c.name);
      tr.appendChild(el("td", "", c.name));
      tr.appendChild(el("td", "", String(c.devices)));
      tr.appendChild(el("td", "", String(c.free)));
      body.appendChild(tr);
    });
  }

  function apply(msg) {
    if (msg.type === "snapshot") {
      for (var node in rows) removeRow(node);
    }
    (msg.nodes || []).forEach(setRow);
    (msg.removed || []).forEach(removeRow);
    if (msg.pending) setPending(msg.pending);
    if (msg.classes) setClasses(msg.classes);
    recount();
    if (selected) show(selected);
    updates++;
    document.body.setAttribute("data-updates", String(updates));
    if (msg.type === "snapshot") document.body.setAttribute("data-ready", "1");
  }

  var source = new EventSource("events");
  source.onopen = function () { statusEl.textContent = "live"; statusEl.setAttribute("data-status", "live"); };
  source.onerror = function () { statusEl.textContent = "reconnecting…"; statusEl.setAttribute("data-status", "reconnecting"); };
  source.onmessage = function (e) { apply(JSON.parse(e.data)); };
})();
