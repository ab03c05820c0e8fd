// Refreshes the page's figures every planning interval (main's
// data-refresh, in seconds) by fetching the page again and swapping its
// <main>. The pages read the same without it. Pages with forms are not
// refreshed, so nothing typed is lost.
(function () {
  "use strict";
  var main = document.querySelector("main[data-refresh]");
  if (!main || !window.fetch || !window.DOMParser) return;
  var every = Math.max(250, 1000 * parseFloat(main.getAttribute("data-refresh")));
  var busy = false;
  setInterval(function () {
    if (busy || document.hidden) return;
    busy = true;
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (!text) return;
        var next = new DOMParser().parseFromString(text, "text/html").querySelector("main");
        if (next) main.innerHTML = next.innerHTML;
      })
      .catch(function () {})
      .then(function () { busy = false; });
  }, every);
})();
