// Agent editor: "Add tool" / "Add header" append a blank row to a Django formset.
(function () {
  "use strict";

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-formset-add]");
    if (!button) return;
    var prefix = button.getAttribute("data-formset-add");
    var form = button.closest("form");
    var template = document.getElementById(prefix + "-empty");
    var rows = form && form.querySelector("#" + prefix + "-rows");
    var total = form && form.querySelector("input[name='" + prefix + "-TOTAL_FORMS']");
    if (!template || !rows || !total) return;

    var index = parseInt(total.value, 10) || 0;
    var max = form.querySelector("input[name='" + prefix + "-MAX_NUM_FORMS']");
    if (max && index >= parseInt(max.value, 10)) {
      if (window.Evalsite) window.Evalsite.showToast("That is the most this form allows.", "warning");
      return;
    }
    // Django's empty_form uses __prefix__ where the row number goes.
    var html = template.innerHTML.replace(/__prefix__/g, String(index));
    rows.insertAdjacentHTML("beforeend", html);
    total.value = String(index + 1);

    var empty = button.parentElement.querySelector(".formset-empty") || form.querySelector("#" + prefix + "-rows ~ .formset-empty");
    if (empty) empty.hidden = true;
    var first = rows.lastElementChild && rows.lastElementChild.querySelector("input:not([type=hidden]), textarea");
    if (first) first.focus();
  });
})();
