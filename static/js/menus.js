// Pages with <details class="ds-menu"> menus (Import, Export): close them on a click
// elsewhere or Escape, and when one of their items is chosen. Moved out of the templates:
// the Content-Security-Policy allows no inline script.
(function () {
  "use strict";
  var MENUS = "details.ds-menu[open], details.run-export[open]";

  document.addEventListener("click", function (event) {
    var item = event.target.closest("details.ds-menu a, details.run-export a");
    document.querySelectorAll(MENUS).forEach(function (menu) {
      if (!menu.contains(event.target) || (item && menu.contains(item))) menu.open = false;
    });
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    document.querySelectorAll(MENUS).forEach(function (menu) {
      menu.open = false;
      var summary = menu.querySelector("summary");
      if (summary) summary.focus();
    });
  });
})();
