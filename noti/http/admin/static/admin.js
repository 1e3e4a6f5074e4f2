// noti's admin page: refreshes the live counters of the overview every few seconds. Every page
// works without it (the counters then show when the page was loaded; "Refresh" reloads them).
"use strict";
(function () {
  var section = document.getElementById("counters");
  if (!section || !window.fetch || !window.DOMParser) { return; }
  var every = 1000 * (parseInt(section.getAttribute("data-refresh-s"), 10) || 5);
  function refresh() {
    if (document.hidden) { return; }
    fetch(window.location.href, { credentials: "same-origin", redirect: "error" })
      .then(function (answer) { return answer.ok ? answer.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("counters");
        var current = document.getElementById("counters");
        if (fresh && current) { current.replaceWith(document.importNode(fresh, true)); }
      })
      .catch(function () { /* the next round tries again */ });
  }
  window.setInterval(refresh, every);
}());
