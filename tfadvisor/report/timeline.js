/* tfadvisor timeline viewer: draws the lanes of <script id="...-data"> into the SVG beside it.
   Wheel: zoom about the pointer; drag: pan; buttons: zoom, pan, reset; a finding chip zooms to
   its evidence. Spans closer than a pixel are drawn as one bar whose height is their active share. */
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg", LABEL = 170, RIGHT = 12, LH = 18, GAP = 4, TOP = 8, AXIS = 30;
  var COLOURS = {"steps": "#4e79a7", "device compute": "#4e79a7", "device copies": "#76b7b2",
    "device collectives": "#59a14f", "training threads": "#f28e2b", "input wait": "#e15759",
    "tf.data workers": "#b07aa1", "host collectives": "#59a14f", "python": "#9c755f", "idle": "#e15759",
    "marks": "#d62728"};
  var SEV = {"critical": "#c62828", "high": "#c62828", "error": "#c62828", "warning": "#ef6c00", "medium": "#ef6c00"};

  function fmt(ms) {
    var a = Math.abs(ms);
    if (a < 1e-9) return "0";
    if (a >= 1000) return (ms / 1000).toPrecision(4) + " s";
    if (a >= 1) return ms.toPrecision(4) + " ms";
    if (a >= 0.001) return (ms * 1000).toPrecision(3) + " us";
    return (ms * 1e6).toPrecision(3) + " ns";
  }
  // one tick set: one unit and the same decimals for every tick (0.0 0.5 1.0 1.5 ms)
  function tickFmt(step) {
    var u = step >= 1000 ? [1000, " s"] : step >= 1 ? [1, " ms"] : step >= 0.001 ? [0.001, " us"] : [1e-6, " ns"];
    var v = step / u[0], d = 0;
    while (d < 6 && Math.abs(Math.round(v * Math.pow(10, d)) - v * Math.pow(10, d)) > 1e-6 * Math.pow(10, d)) d++;
    return function (t) { return Math.abs(t) < 1e-12 ? "0" : (t / u[0]).toFixed(d) + u[1]; };
  }
  function esc(s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }
  function lower(arr, x) {  // first index with arr[i] >= x
    var lo = 0, hi = arr.length;
    while (lo < hi) { var m = (lo + hi) >> 1; if (arr[m] < x) lo = m + 1; else hi = m; }
    return lo;
  }
  function niceStep(span, n) {
    var raw = span / n, mag = Math.pow(10, Math.floor(Math.log10(raw))), ks = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < ks.length; i++) if (ks[i] * mag >= raw) return ks[i] * mag;
    return 10 * mag;
  }

  function Viewer(box) {
    var self = this;
    this.box = box;
    this.svg = box.querySelector("svg");
    this.data = JSON.parse(box.querySelector("script[type='application/json']").textContent);
    this.range = box.querySelector(".tl-range");
    this.full = [0, Math.max(this.data.span_ms, 1e-9)];
    this.v0 = this.full[0]; this.v1 = this.full[1];
    this.focus = null;
    this.data.lanes.forEach(function (l) {  // the end of the widest span so far: finds spans that reach in
      var m = 0; l.reach = l.e.map(function (e) { m = Math.max(m, e); return m; });
    });
    box.querySelectorAll("button[data-act]").forEach(function (b) {
      b.addEventListener("click", function () { self.act(b.getAttribute("data-act")); });
    });
    box.querySelectorAll("button.tl-chip").forEach(function (b) {
      b.addEventListener("click", function () { self.showFinding(b.getAttribute("data-rule")); });
    });
    this.svg.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var t = self.timeAt(ev.clientX);
      self.zoom(ev.deltaY < 0 ? 1 / 1.5 : 1.5, t);
    }, {passive: false});
    var drag = null;
    this.svg.addEventListener("mousedown", function (ev) { drag = {x: ev.clientX, v0: self.v0, v1: self.v1}; });
    window.addEventListener("mousemove", function (ev) {
      if (!drag) return;
      var dt = (ev.clientX - drag.x) / self.plotWidth() * (drag.v1 - drag.v0);
      self.set(drag.v0 - dt, drag.v1 - dt);
    });
    window.addEventListener("mouseup", function () { drag = null; });
    this.svg.addEventListener("dblclick", function () { self.act("reset"); });
    window.addEventListener("resize", function () { self.draw(); });
    this.draw();
  }
  Viewer.prototype.width = function () { return Math.max(this.svg.clientWidth || this.box.clientWidth || 800, 300); };
  Viewer.prototype.plotWidth = function () { return this.width() - LABEL - RIGHT; };
  Viewer.prototype.timeAt = function (clientX) {
    var r = this.svg.getBoundingClientRect(), x = Math.min(Math.max(clientX - r.left - LABEL, 0), this.plotWidth());
    return this.v0 + x / this.plotWidth() * (this.v1 - this.v0);
  };
  Viewer.prototype.set = function (a, b) {
    var span = Math.min(b - a, this.full[1] - this.full[0]), minSpan = 1e-6;
    if (span < minSpan) { var c = (a + b) / 2; a = c - minSpan / 2; b = c + minSpan / 2; span = minSpan; }
    if (a < this.full[0]) { a = this.full[0]; b = a + span; }
    if (b > this.full[1]) { b = this.full[1]; a = b - span; }
    this.v0 = a; this.v1 = b;
    this.draw();
  };
  Viewer.prototype.zoom = function (k, about) {
    if (about === undefined) about = (this.v0 + this.v1) / 2;
    this.set(about - (about - this.v0) * k, about + (this.v1 - about) * k);
  };
  Viewer.prototype.act = function (a) {
    var w = this.v1 - this.v0;
    if (a === "in") this.zoom(1 / 2);
    else if (a === "out") this.zoom(2);
    else if (a === "left") this.set(this.v0 - w / 3, this.v1 - w / 3);
    else if (a === "right") this.set(this.v0 + w / 3, this.v1 + w / 3);
    else if (a === "reset") { this.focus = null; this.set(this.full[0], this.full[1]); }
  };
  Viewer.prototype.showFinding = function (rule) {
    var f = this.data.findings.filter(function (x) { return x.rule === rule; })[0];
    if (!f) return;
    this.focus = f;
    if (f.s.length) {
      var a = f.s[0], b = f.e[0], pad = Math.max((b - a) * 2, (this.full[1] - this.full[0]) / 200);
      this.set(a - pad, b + pad);
    } else { this.set(this.full[0], this.full[1]); }
  };
  Viewer.prototype.draw = function () {
    var W = this.width(), pw = this.plotWidth(), v0 = this.v0, v1 = this.v1, per = (v1 - v0) / pw;
    var lanes = this.data.lanes, focus = this.focus, out = [];
    var H = TOP + lanes.length * (LH + GAP) + AXIS;
    this.svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    this.svg.setAttribute("height", H);
    this.svg.setAttribute("data-v0", v0);
    this.svg.setAttribute("data-v1", v1);
    lanes.forEach(function (l, li) {
      var y = TOP + li * (LH + GAP), colour = COLOURS[l.kind] || "#4e79a7";
      var hot = focus && (focus.lanes.indexOf(l.kind) >= 0 && (!focus.host || focus.host === l.host) ||
                          l.kind === "marks");
      if (li > 0 && l.host !== lanes[li - 1].host) {  // a rule between hosts
        out.push('<line class="host-rule" x1="0" x2="' + W + '" y1="' + (y - GAP / 2) + '" y2="' + (y - GAP / 2) +
                 '" stroke="#888"/>');
      }
      out.push('<g class="lane" data-lane="' + esc(l.name) + '">');
      out.push('<rect x="' + LABEL + '" y="' + y + '" width="' + pw + '" height="' + LH + '" fill="' +
               (hot ? "#fff3e0" : "#f4f4f6") + '"/>');
      var tags = l.tags && l.tags.length ? " [" + l.tags.join(", ") + "]" : "";
      out.push('<text x="' + (LABEL - 6) + '" y="' + (y + 13) + '" text-anchor="end" fill="#333">' +
               esc(l.name.length > 26 ? l.name.slice(0, 25) + "\u2026" : l.name) +
               (tags ? '<tspan fill="#c62828">*</tspan>' : "") + "<title>" + esc(l.name + tags) + "</title></text>");
      var i = Math.max(lower(l.reach, v0), 0), n = l.s.length, cur = null, drawn = 0;
      var flush = function () {
        if (!cur) return;
        var wpx = Math.max(cur.xb - cur.xa, 1), frac = Math.min(cur.act / (wpx * per), 1);
        if (l.kind === "marks" || l.kind === "steps") frac = 1;
        var h = Math.max(LH * frac, 0.5), x = LABEL + cur.xa;
        var fill = l.kind === "marks" ? (SEV[cur.sev] || colour) : (cur.out ? "#d62728" :
                   (l.kind === "steps" && cur.k % 2 ? "#a0cbe8" : colour));
        out.push('<rect class="span" x="' + x.toFixed(2) + '" y="' + (y + LH - h).toFixed(2) + '" width="' +
                 wpx.toFixed(2) + '" height="' + h.toFixed(2) + '" fill="' + fill + '" data-t0="' + cur.t0 +
                 '" data-t1="' + cur.t1 + '"><title>' + esc(cur.tip + ": " + fmt(cur.t0) + " to " + fmt(cur.t1) +
                 (cur.count > 1 ? " (" + cur.count + " spans)" : "") +
                 (l.kind === "marks" || l.kind === "steps" ? "" : ", " + Math.round(100 * cur.act / Math.max(cur.t1 - cur.t0, 1e-12)) + " % active")) +
                 "</title></rect>");
        drawn++; cur = null;
      };
      for (; i < n && l.s[i] <= v1; i++) {
        var s = Math.max(l.s[i], v0), e = Math.min(l.e[i], v1);
        if (e < s) continue;
        var xa = (s - v0) / per, xb = (e - v0) / per;
        var act = (e - s) * (l.f ? l.f[i] / 100 : 1);
        var label = l.label ? l.label[i] : "", isOut = l.outlier && l.outlier.indexOf(i) >= 0;
        var join = cur && (l.kind === "steps" ? xb - cur.xa < 2 : xa < Math.max(cur.xb, cur.xa + 1) + 0.5);
        if (join) {
          cur.xb = Math.max(cur.xb, xb); cur.t1 = Math.max(cur.t1, e); cur.act += act; cur.count++;
          cur.out = cur.out || isOut;
        } else {
          flush();
          var tip = l.kind === "marks" ? l.rule[i] + " - " + l.label[i] : l.kind === "steps" ?
                    "step " + label + (isOut ? " (outlier)" : "") : l.name;
          cur = {xa: xa, xb: xb, t0: s, t1: e, act: act, count: 1, tip: tip, out: isOut, k: i,
                 sev: l.kind === "marks" ? (this.sevOf(l.rule[i])) : ""};
        }
      }
      flush();
      out.push("</g>");
    }, this);
    // the axis
    var y0 = TOP + lanes.length * (LH + GAP), step = niceStep(v1 - v0, Math.max(Math.floor(pw / 110), 2));
    out.push('<line x1="' + LABEL + '" x2="' + (LABEL + pw) + '" y1="' + y0 + '" y2="' + y0 + '" stroke="#333"/>');
    var tick = tickFmt(step);
    for (var t = Math.ceil(v0 / step) * step; t <= v1 + step * 1e-9; t += step) {
      var x = LABEL + (t - v0) / per;
      out.push('<line x1="' + x.toFixed(1) + '" x2="' + x.toFixed(1) + '" y1="' + TOP + '" y2="' + (y0 + 4) +
               '" stroke="#ccc" stroke-width="0.5"/><text class="tick" x="' + x.toFixed(1) + '" y="' + (y0 + 16) +
               '" text-anchor="middle" fill="#333">' + esc(tick(t)) + "</text>");
    }
    this.svg.innerHTML = out.join("");
    if (this.range) {
      this.range.textContent = "showing " + fmt(v0) + " to " + fmt(v1) + " of " + fmt(this.full[1]) +
        (this.focus ? " - " + this.focus.rule + ": " + (this.focus.s.length ? this.focus.s.length + " marked spans"
                                                         : "its lanes are highlighted") : "");
    }
  };
  Viewer.prototype.sevOf = function (rule) {
    var f = this.data.findings.filter(function (x) { return x.rule === rule; })[0];
    return f ? f.sev : "";
  };
  document.querySelectorAll(".tl").forEach(function (box) { box.viewer = new Viewer(box); });
})();
