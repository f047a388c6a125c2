/*
 * citewise chat widget. One tag adds a chat bubble to any page:
 *
 *   <script src="https://YOUR-SERVER/widget.js" data-kb="KNOWLEDGE BASE" data-key="WIDGET KEY"
 *           data-title="Ask our docs" async></script>
 *
 * The key must be a widget key made for that knowledge base and this page's origin.
 * A reply is shown from its start (the log scrolls to the question, not past a long answer).
 * Answers show their citations, each source named by its document's title and section; a
 * citation opens what it quotes from its passage (a table row as a table, under its header),
 * and the whole passage on request. Refusals say why in plain words and list the closest
 * topics, each a button that asks about it. The widget keeps the conversation (the latest
 * MAX_TURNS turns, sent as `history`), so a follow-up such as "How is it dosed?" is read with
 * the questions before it; "New" starts over. Every text that comes from documents or the
 * server is set with textContent, never parsed as HTML.
 */
(function () {
  "use strict";
  var script = document.currentScript;
  if (!script || window.__citewiseWidget) { return; }
  window.__citewiseWidget = true;
  var kb = script.getAttribute("data-kb") || "";
  var key = script.getAttribute("data-key") || "";
  var api = (script.getAttribute("data-api") || new URL(script.src, location.href).origin).replace(/\/$/, "");
  var title = script.getAttribute("data-title") || "Ask a question";
  var base = api + "/v1/kbs/" + encodeURIComponent(kb);
  var MAX_TURNS = 20, MAX_TURN_CHARS = 4000;  // the API's limits on `history`
  var history = [];

  var css = [
    ".cw-root{position:fixed;right:20px;bottom:20px;z-index:2147483000;font:14px/1.45 system-ui,sans-serif;color:#1d2330}",
    ".cw-bubble{width:56px;height:56px;border-radius:50%;border:0;background:#2457c5;color:#fff;cursor:pointer;box-shadow:0 4px 14px rgba(0,0,0,.25);float:right;display:flex;align-items:center;justify-content:center}",
    ".cw-panel{display:none;width:360px;max-width:calc(100vw - 40px);height:480px;max-height:calc(100vh - 110px);background:#fff;border-radius:12px;box-shadow:0 8px 30px rgba(0,0,0,.25);margin-bottom:12px;flex-direction:column;overflow:hidden}",
    ".cw-open .cw-panel{display:flex}",
    ".cw-head{background:#2457c5;color:#fff;padding:10px 14px;font-weight:600;display:flex;align-items:center}",
    ".cw-head span{flex:1}",
    ".cw-reset{border:1px solid rgba(255,255,255,.6);background:transparent;color:#fff;border-radius:6px;cursor:pointer;font:12px system-ui,sans-serif;padding:2px 8px}",
    ".cw-topic{border:0;background:none;padding:0;font:inherit;text-align:left;vertical-align:top;color:#2457c5;cursor:pointer;text-decoration:underline;font-weight:600}",
    ".cw-log{flex:1;overflow-y:auto;padding:10px 12px;background:#f6f7fb}",
    ".cw-msg{margin:8px 0;padding:8px 10px;border-radius:10px;white-space:pre-wrap;word-wrap:break-word}",
    ".cw-user{background:#dfe8fb;margin-left:40px}",
    ".cw-answer{background:#fff;border:1px solid #dde2ee;margin-right:20px}",
    ".cw-refusal{background:#fff8e6;border:1px solid #f0d48a;margin-right:20px}",
    ".cw-error{background:#fde8e8;border:1px solid #f2b8b8}",
    ".cw-cite{color:#2457c5;cursor:pointer;text-decoration:underline;font-weight:600}",
    ".cw-sources,.cw-related{margin:6px 0 0;padding-left:18px;font-size:12.5px;white-space:normal}",
    ".cw-related{margin:4px 0 6px}",
    ".cw-related li+li{margin-top:3px}",
    ".cw-passage{margin-top:6px;padding:6px 8px;border-left:3px solid #2457c5;background:#f0f4fd;font-size:12.5px;white-space:pre-wrap}",
    ".cw-passage-head{font-weight:600;display:block;margin-bottom:2px}",
    ".cw-text>*+*{margin-top:6px}",
    ".cw-table{border-collapse:collapse;margin:4px 0;font-size:12.5px;white-space:normal}",
    ".cw-table th,.cw-table td{border:1px solid #ccd3e3;padding:2px 6px;text-align:left;vertical-align:top}",
    ".cw-table th{background:#eef1f8}",
    ".cw-more{border:0;background:none;color:#2457c5;cursor:pointer;padding:0;font:inherit;text-decoration:underline}",
    ".cw-feedback{margin-top:6px;font-size:12px;color:#59607a}",
    ".cw-feedback button{border:1px solid #ccd;background:#fff;border-radius:6px;margin-left:4px;cursor:pointer}",
    ".cw-form{display:flex;border-top:1px solid #dde2ee}",
    ".cw-input{flex:1;border:0;padding:10px;font:inherit;outline:none}",
    ".cw-send{border:0;background:#2457c5;color:#fff;padding:0 14px;cursor:pointer;font:inherit}"
  ].join("\n");

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  var style = el("style");
  style.textContent = css;
  var root = el("div", "cw-root");
  root.setAttribute("data-citewise", "");
  var panel = el("div", "cw-panel");
  panel.setAttribute("role", "dialog");
  panel.setAttribute("aria-label", title);
  var head = el("div", "cw-head");
  head.appendChild(el("span", "", title));
  var reset = el("button", "cw-reset", "New");
  reset.type = "button";
  reset.title = "Start a new conversation";
  head.appendChild(reset);
  var log = el("div", "cw-log");
  log.setAttribute("aria-live", "polite");
  var form = el("form", "cw-form");
  var input = el("input", "cw-input");
  input.type = "text";
  input.maxLength = 2000;
  input.placeholder = "Type a question";
  input.setAttribute("aria-label", "Your question");
  var send = el("button", "cw-send", "Ask");
  send.type = "submit";
  form.appendChild(input);
  form.appendChild(send);
  panel.appendChild(head);
  panel.appendChild(log);
  panel.appendChild(form);
  var bubble = el("button", "cw-bubble");
  bubble.type = "button";
  var svgNS = "http://www.w3.org/2000/svg";
  var icon = document.createElementNS(svgNS, "svg");
  icon.setAttribute("viewBox", "0 0 24 24");
  icon.setAttribute("width", "28");
  icon.setAttribute("height", "28");
  icon.setAttribute("aria-hidden", "true");
  var path = document.createElementNS(svgNS, "path");
  path.setAttribute("fill", "currentColor");
  path.setAttribute("d", "M4 3h16a2 2 0 0 1 2 2v11a2 2 0 0 1-2 2H9l-5 4v-4H4a2 2 0 0 1-2-2V5a2 2 0 0 1 2-2z");
  icon.appendChild(path);
  bubble.appendChild(icon);
  bubble.setAttribute("aria-label", "Open chat");
  root.appendChild(panel);
  root.appendChild(bubble);

  bubble.addEventListener("click", function () {
    root.classList.toggle("cw-open");
    if (root.classList.contains("cw-open")) { input.focus(); }
  });

  function request(path, options) {
    options = options || {};
    options.headers = Object.assign({"Authorization": "Bearer " + key}, options.headers || {});
    return fetch(base + path, options).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (body) {
        if (!response.ok) {
          var wait = response.headers.get("Retry-After");
          var detail = typeof body.detail === "string" ? body.detail : "The request failed (" + response.status + ").";
          throw new Error(wait ? detail + " Try again in " + wait + " s." : detail);
        }
        return body;
      });
    });
  }

  function add(node) {
    log.appendChild(node);
    log.scrollTop = log.scrollHeight;
    return node;
  }

  // scroll the log to bring `node`'s top (less a margin) to its top; the browser stops at the
  // end, so a node shorter than what is left below it is shown whole
  function scrollToStart(node) {
    log.scrollTop += node.getBoundingClientRect().top - log.getBoundingClientRect().top - 8;
  }

  // a reply from its start: its question above it when that leaves room for the reply's
  // beginning, else the reply's first line at the top; never the end of a long answer
  function showReply(question, reply) {
    var room = reply.getBoundingClientRect().top - question.getBoundingClientRect().top;
    scrollToStart(room < log.clientHeight / 2 ? question : reply);
  }

  // an opened passage in view, its start first
  function reveal(node) {
    var box = node.getBoundingClientRect(), view = log.getBoundingClientRect();
    if (box.top < view.top || box.height > view.height) { scrollToStart(node); }
    else if (box.bottom > view.bottom) { log.scrollTop += box.bottom - view.bottom + 8; }
  }

  // a source as a reader knows it: its document's title (file name from a server without
  // titles), then its section when that is not the title again
  function sourceName(c) {
    var doc = c.title || c.doc_id;
    return c.section && c.section !== doc ? doc + " \u203A " + c.section : doc;
  }

  // Text with [n] markers: each marker a link when link(n) gives one, else left as it is.
  function marked(parent, text, link) {
    String(text).split(/(\[\d+\])/).forEach(function (part) {
      var m = /^\[(\d+)\]$/.exec(part);
      var a = m ? link(m[1]) : null;
      parent.appendChild(a || document.createTextNode(part));
    });
  }

  function cells(line) {
    var body = line.trim().replace(/^\|/, "").replace(/\|$/, "");
    return body.split("|").map(function (c) { return c.trim(); });
  }

  // An answer or a quote: blocks split by blank lines; a block of "| a | b |" lines (a header,
  // then rows, markers after a row) is shown as a table, any other as text.
  function rendered(text, link) {
    var holder = el("div", "cw-text");
    String(text || "").split(/\n\s*\n/).forEach(function (block) {
      var lines = block.trim().split("\n");
      if (!block.trim()) { return; }
      if (!lines.every(function (l) { return /^\s*\|/.test(l); })) {
        var para = el("div");
        marked(para, block.trim(), link);
        holder.appendChild(para);
        return;
      }
      var table = el("table", "cw-table");
      lines.forEach(function (line, i) {
        var tail = /((?:\s*\[\d+\])+)\s*$/.exec(line);
        var row = cells(tail ? line.slice(0, tail.index) : line);
        var tr = el("tr");
        row.forEach(function (cell, j) {
          var td = el(i === 0 ? "th" : "td");
          marked(td, cell + (tail && j === row.length - 1 ? " " + tail[1].trim() : ""), link);
          tr.appendChild(td);
        });
        table.appendChild(tr);
      });
      holder.appendChild(table);
    });
    return holder;
  }

  function noLink() { return null; }

  // A citation opens what it quotes from its passage (tables as tables); the whole passage is
  // one more click away.
  function openPassage(holder, citation) {
    var chunkId = citation.chunk_id;
    var existing = holder.querySelector('.cw-passage[data-chunk="' + chunkId.replace(/[^A-Za-z0-9]/g, "") + '"]');
    if (existing) { existing.remove(); return; }
    var box = el("div", "cw-passage");
    box.setAttribute("data-chunk", chunkId.replace(/[^A-Za-z0-9]/g, ""));
    box.appendChild(el("span", "cw-passage-head", sourceName(citation)));
    var quote = rendered(citation.quote, noLink);
    box.appendChild(quote);
    var more = el("button", "cw-more", "Show the whole passage");
    more.type = "button";
    more.addEventListener("click", function () {
      request("/passages/" + encodeURIComponent(chunkId)).then(function (p) {
        quote.replaceWith(rendered(p.text, noLink));
        more.remove();
      }).catch(function (e) { box.appendChild(el("div", "cw-msg cw-error", e.message)); });
    });
    box.appendChild(more);
    holder.appendChild(box);
    reveal(box);
  }

  function citeLink(holder, citation) {
    var a = el("a", "cw-cite", "[" + citation.n + "]");
    a.href = base + "/passages/" + encodeURIComponent(citation.chunk_id);
    a.title = sourceName(citation);
    a.addEventListener("click", function (event) {
      event.preventDefault();
      openPassage(holder, citation);
    });
    return a;
  }

  function feedback(holder, token) {
    if (!token) { return; }
    var row = el("div", "cw-feedback", "Helpful?");
    [["Yes", true], ["No", false]].forEach(function (choice) {
      var b = el("button", "", choice[0]);
      b.type = "button";
      b.addEventListener("click", function () {
        request("/feedback", {method: "POST", headers: {"Content-Type": "application/json"},
                              body: JSON.stringify({feedback_token: token, helpful: choice[1]})})
          .then(function () { row.textContent = "Thanks for the feedback."; })
          .catch(function (e) { row.textContent = e.message; });
      });
      row.appendChild(b);
    });
    holder.appendChild(row);
  }

  function showAnswer(data) {
    var box = el("div", "cw-msg cw-answer");
    box.setAttribute("data-status", "answered");
    var byN = {};
    (data.citations || []).forEach(function (c) { byN[c.n] = c; });
    box.appendChild(rendered(data.answer, function (n) { return byN[n] ? citeLink(box, byN[n]) : null; }));
    if (data.citations && data.citations.length) {
      var list = el("ol", "cw-sources");
      data.citations.forEach(function (c) {
        var li = el("li");
        li.appendChild(citeLink(box, c));
        li.appendChild(document.createTextNode(" " + sourceName(c)));
        list.appendChild(li);
      });
      box.appendChild(list);
    }
    feedback(box, data.feedback_token);
    return box;
  }

  // a topic as a question: its heading path in words, "Varenicline › Dosing" -> "Varenicline: Dosing"
  function topicQuestion(topic) {
    return topic.split("\u203A").map(function (p) { return p.trim(); })
      .filter(function (p) { return p; }).join(": ");
  }

  // a topic as a button (read out as one) that asks about it
  function topicButton(topic) {
    var b = el("button", "cw-topic", topic);
    b.type = "button";
    b.title = "Ask about this";
    b.addEventListener("click", function () { ask(topicQuestion(topic)); });
    return b;
  }

  // the plain reason, its closest topics as a list (an item a topic, each a button that asks
  // about it) where the reason names them one after the other, "...cover are: A; B; C. You
  // can ask ...", or after the reason when it does not
  function showRefusal(data) {
    var box = el("div", "cw-msg cw-refusal");
    box.setAttribute("data-status", "refused");
    var reason = String(data.reason || "This knowledge base does not cover that question.");
    var topics = (data.related || []).filter(function (topic) { return topic; });
    var named = topics.length ? reason.indexOf(topics.join("; ")) : -1;
    var after = "";
    if (named >= 0) {
      after = reason.slice(named + topics.join("; ").length).replace(/^[\s.;,]+/, "");
      reason = reason.slice(0, named).trim();
    }
    box.appendChild(el("div", "cw-text", reason));
    if (topics.length) {
      var list = el("ul", "cw-related");
      list.setAttribute("aria-label", "Related topics");
      topics.forEach(function (topic) {
        var item = el("li");
        item.appendChild(topicButton(topic));
        list.appendChild(item);
      });
      box.appendChild(list);
    }
    if (after) { box.appendChild(el("div", "cw-text", after)); }
    feedback(box, data.feedback_token);
    return box;
  }

  function remember(question, data) {
    var reply = data.status === "answered" ? data.answer : data.reason;
    history.push({role: "user", content: question.slice(0, MAX_TURN_CHARS)});
    if (reply) { history.push({role: "assistant", content: String(reply).slice(0, MAX_TURN_CHARS)}); }
    history = history.slice(-MAX_TURNS);
  }

  function ask(question) {
    if (!question || send.disabled) { return; }
    var asking = add(el("div", "cw-msg cw-user", question));
    var waiting = add(el("div", "cw-msg cw-answer cw-waiting", "\u2026"));
    var reply = waiting;
    send.disabled = true;
    var asked = history.slice();
    request("/ask", {method: "POST", headers: {"Content-Type": "application/json"},
                     body: JSON.stringify({question: question, history: asked})})
      .then(function (data) {
        remember(question, data);
        reply = data.status === "answered" ? showAnswer(data) : showRefusal(data);
        waiting.replaceWith(reply);
      })
      .catch(function (e) {
        reply = el("div", "cw-msg cw-error", e.message);
        waiting.replaceWith(reply);
      })
      .then(function () { send.disabled = false; showReply(asking, reply); });
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var question = input.value.trim();
    if (!question || send.disabled) { return; }
    input.value = "";
    ask(question);
  });

  reset.addEventListener("click", function () {
    history = [];
    while (log.firstChild) { log.removeChild(log.firstChild); }
    input.focus();
  });

  function mount() {
    document.head.appendChild(style);
    document.body.appendChild(root);
  }
  if (document.body) { mount(); } else { document.addEventListener("DOMContentLoaded", mount); }
})();
