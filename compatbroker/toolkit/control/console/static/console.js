// The compatbroker console's only script: keeps the live part of a page (#live, refreshed every
// data-refresh ms) current by fetching the same URL with ?fragment=1 and swapping the HTML in.
// The server renders and escapes that HTML; this script adds no markup of its own.
(function () {
  "use strict";
  var live = document.getElementById("live");
  var every = live ? parseInt(live.getAttribute("data-refresh") || "0", 10) : 0;
  if (!every) { return; }
  var pause = document.getElementById("pause");
  var banner = document.getElementById("connection");

  function fragmentUrl() {
    var url = new URL(window.location.href);
    url.searchParams.set("fragment", "1");
    return url.toString();
  }

  function refresh() {
    if (document.hidden || (pause && pause.checked)) {
      window.setTimeout(refresh, every);
      return;
    }
    fetch(fragmentUrl(), { headers: { "Accept": "text/html" }, cache: "no-store" })
      .then(function (response) {
        return response.text().then(function (html) {
          // An error page (the topic or group went away) is shown too: it says what happened.
          live.innerHTML = html;
          live.setAttribute("data-status", String(response.status));
          banner.hidden = true;
        });
      })
      .catch(function () { banner.hidden = false; })
      .then(function () { window.setTimeout(refresh, every); });
  }

  window.setTimeout(refresh, every);
}());
