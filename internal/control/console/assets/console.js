// Refreshes the page's figures every planning interval (main's
// data-refresh, in seconds) by fetching the page again and swapping its
// <main>. The pages read the same without it. Pages with forms are not
// refreshed, so nothing typed is lost.
//
// A refresh that fails (coordinator unreachable, an error status such as
// 404 for a deleted rule) leaves the page as it was under a banner saying
// since when and why it is not refreshed; the refreshes go on, and the
// first that succeeds removes the banner. A refresh sent to the sign-in
// page (a revoked token, a signed-out session) goes there instead. A page
// that takes long to build is fetched less often: the wait after each
// refresh is at least four times the time it took.
(function () {
  "use strict";
  var main = document.querySelector("main[data-refresh]");
  if (!main || !window.fetch || !window.DOMParser) return;
  var every = Math.max(250, 1000 * parseFloat(main.getAttribute("data-refresh")));
  var lastGood = new Date();
  var banner = null;

  function two(n) { return (n < 10 ? "0" : "") + n; }
  function hms(d) { return two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds()); }

  function stale(reason) {
    if (!banner) {
      banner = document.createElement("p");
      banner.id = "stale";
      banner.className = "banner error stale";
      banner.setAttribute("role", "alert");
      main.parentNode.insertBefore(banner, main);
    }
    banner.textContent = "Not refreshed since " + hms(lastGood) + ": " + reason + ". Retrying.";
  }

  function fresh() {
    lastGood = new Date();
    if (banner) {
      banner.parentNode.removeChild(banner);
      banner = null;
    }
  }

  // reasonOf says why an answer other than 2xx is not the page, with the
  // console's own message when its error page gives one.
  function reasonOf(r, text) {
    var said = "";
    var doc = text ? new DOMParser().parseFromString(text, "text/html") : null;
    var el = doc && doc.querySelector("#error");
    if (el) said = ": " + el.textContent.trim().slice(0, 300);
    if (r.status === 404) return "the rule was deleted or is not found (HTTP 404)" + said;
    return "the coordinator answered HTTP " + r.status + said;
  }

  function signedOut(r) {
    try {
      return new URL(r.url).pathname === "/ui/signin";
    } catch (e) {
      return false;
    }
  }

  var stopped = false;
  function leave(url) {
    stopped = true;
    location.assign(url);
  }

  function tick() {
    if (stopped) return;
    if (document.hidden) {
      setTimeout(tick, every);
      return;
    }
    var started = Date.now();
    // Weir-Console-Refresh: the server keeps the session's one-time
    // warnings for the page the operator opens next, not this fetch.
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html", "Weir-Console-Refresh": "1" } })
      .then(function (r) {
        if (r.redirected && signedOut(r)) {
          leave(r.url);
          return;
        }
        return r.text().then(function (text) {
          if (!r.ok) {
            stale(reasonOf(r, text));
            return;
          }
          var next = new DOMParser().parseFromString(text, "text/html").querySelector("main");
          if (!next || !next.hasAttribute("data-refresh")) {
            // Not this page any more (the sign-in page, or another):
            // show it rather than put it inside this one.
            leave(r.url);
            return;
          }
          main.innerHTML = next.innerHTML;
          fresh();
        });
      }, function () {
        stale("the coordinator is unreachable");
      })
      .catch(function (e) {
        stale("the page could not be read (" + e + ")");
      })
      .then(function () {
        if (!stopped) setTimeout(tick, Math.max(every, 4 * (Date.now() - started)));
      });
  }
  setTimeout(tick, every);
})();
