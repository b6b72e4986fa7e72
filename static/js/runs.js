// The run page: result cards collapse to one line (<details>); the Export menu.
(function () {
  "use strict";

  // A link to one case (#case-3, from the compare page or a shared URL) opens its card.
  function openTargetCase() {
    var match = /^#case-\d+$/.exec(window.location.hash);
    if (!match) return;
    var card = document.getElementById(match[0].slice(1));
    var details = card && card.querySelector("details.result-details");
    if (details && !details.open) details.open = true;
  }
  document.addEventListener("DOMContentLoaded", openTargetCase);
  window.addEventListener("hashchange", openTargetCase);
  // A card the poll fills in place may be the one the address points to.
  document.body.addEventListener("htmx:oobAfterSwap", openTargetCase);

  // The live poll says the run is over (HX-Trigger "run-finished"): a "Stop this run?" dialog
  // still open has nothing left to stop.
  document.body.addEventListener("run-finished", function () {
    var dialog = document.getElementById("stop-dialog");
    if (dialog && dialog.open) dialog.close();
  });

  // The Export menu is a <details>: close it on a click elsewhere or Escape.
  document.addEventListener("click", function (event) {
    document.querySelectorAll("details.run-export[open]").forEach(function (menu) {
      if (!menu.contains(event.target)) menu.open = false;
    });
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    document.querySelectorAll("details.run-export[open]").forEach(function (menu) { menu.open = false; });
  });
})();
