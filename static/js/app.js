// Small behaviours shared by every page. htmx does the rest.
(function () {
  "use strict";

  function showToast(message, level) {
    var box = document.getElementById("toasts");
    if (!box || !message) return;
    var toast = document.createElement("div");
    toast.className = "toast toast-" + (level || "success");
    toast.setAttribute("role", "status");
    toast.textContent = message; // text, never HTML
    box.appendChild(toast);
    // A warning (e.g. cases an import skipped) stays until it is read and clicked away.
    if (level === "warning" || level === "error") {
      toast.title = "Click to dismiss";
      toast.addEventListener("click", function () { toast.remove(); });
    } else {
      dismissLater(toast);
    }
  }

  function dismissLater(toast) {
    setTimeout(function () {
      toast.classList.add("toast-leaving");
      setTimeout(function () { toast.remove(); }, 300);
    }, 5000);
  }

  // A document preview opened for a case scrolls to the case's row, lines or span.
  function showSourceMark(root) {
    var mark = root && root.querySelector && root.querySelector("[data-source-mark]");
    if (mark && mark.scrollIntoView) mark.scrollIntoView({ block: "center" });
  }
  document.body.addEventListener("htmx:afterSettle", function (event) { showSourceMark(event.target); });
  document.addEventListener("DOMContentLoaded", function () { showSourceMark(document); });

  // Server-side: django_htmx.http.trigger_client_event(response, "toast", {"message": ..., "level": ...})
  document.body.addEventListener("toast", function (event) {
    showToast(event.detail.message, event.detail.level);
  });

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("#toasts .toast").forEach(dismissLater);
    // Tabs scroll sideways on a phone: keep the current one in view.
    document.querySelectorAll(".tabs [aria-current]").forEach(function (tab) {
      var strip = tab.parentElement;
      var overflow = tab.offsetLeft - strip.offsetLeft + tab.offsetWidth - strip.clientWidth;
      if (overflow > 0) strip.scrollLeft = overflow + 12;
    });
    // ...and fade the edge where more tabs are hidden, so a phone user knows to swipe.
    document.querySelectorAll(".tabs").forEach(function (strip) {
      var mark = function () {
        strip.classList.toggle("tabs-more-left", strip.scrollLeft > 2);
        strip.classList.toggle("tabs-more-right", strip.scrollLeft + strip.clientWidth < strip.scrollWidth - 2);
      };
      mark();
      strip.addEventListener("scroll", mark, { passive: true });
      window.addEventListener("resize", mark);
    });
    // A dialog rendered open by the server (e.g. re-shown with form errors).
    document.querySelectorAll("dialog[data-autoopen]").forEach(function (dialog) {
      if (dialog.showModal && !dialog.open) dialog.showModal();
    });
  });

  // <input data-select-on-focus>: a one-time value (a new API token) is selected whole when focused.
  document.addEventListener("focusin", function (event) {
    if (event.target.matches && event.target.matches("input[data-select-on-focus]")) event.target.select();
  });
  document.addEventListener("DOMContentLoaded", function () {
    var focused = document.activeElement;  // autofocus may have run before this script
    if (focused && focused.matches("input[data-select-on-focus]")) focused.select();
  });

  // <button data-copy="#selector"> copies that input's value (or element's text).
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy]");
    if (!button) return;
    var source = document.querySelector(button.getAttribute("data-copy"));
    if (!source) return;
    var text = "value" in source ? source.value : source.textContent;
    var done = function () { showToast("Copied to the clipboard.", "success"); };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { source.select && source.select(); });
    } else if (source.select) {
      // Plain-HTTP deployments have no clipboard API: select the text and use the legacy command.
      source.select();
      if (document.execCommand("copy")) done();
    }
  });

  // <button data-dialog-open="id"> opens <dialog id="id">; [data-dialog-close] closes its dialog.
  document.addEventListener("click", function (event) {
    var opener = event.target.closest("[data-dialog-open]");
    if (opener) {
      var dialog = document.getElementById(opener.getAttribute("data-dialog-open"));
      if (dialog && dialog.showModal) { event.preventDefault(); dialog.showModal(); }
      return;
    }
    var closer = event.target.closest("[data-dialog-close]");
    if (closer) {
      var parent = closer.closest("dialog");
      if (parent) { event.preventDefault(); parent.close(); }
    }
  });

  // A dialog whose content arrives by htmx (hx-target="#dialog-slot") opens itself.
  document.body.addEventListener("htmx:afterSwap", function (event) {
    var dialog = event.detail.target.querySelector && event.detail.target.querySelector("dialog[data-autoopen]");
    if (dialog && !dialog.open) dialog.showModal();
  });

  // Friendly message when a request fails outright (network down, 5xx).
  document.body.addEventListener("htmx:responseError", function (event) {
    var status = event.detail.xhr.status;
    if (status >= 500) showToast("Something went wrong on the server. Please try again.", "error");
  });
  document.body.addEventListener("htmx:sendError", function () {
    showToast("The server could not be reached. Check your connection.", "error");
  });

  // Behaviours declared with data- attributes: the Content-Security-Policy allows no inline
  // script, so no on*= handler either.
  // <select data-submit-on-change> submits its form when changed (the team switcher).
  document.addEventListener("change", function (event) {
    var select = event.target.closest && event.target.closest("[data-submit-on-change]");
    if (select && select.form) select.form.submit();
  });
  document.addEventListener("click", function (event) {
    // <a data-clear="#input"> empties that input (then follows its own hx-get).
    var clearer = event.target.closest("[data-clear]");
    if (clearer) {
      var box = document.querySelector(clearer.getAttribute("data-clear"));
      if (box) box.value = "";
    }
    // <button data-remove-row> removes its .rows-item; <button data-add-row data-rows=id
    // data-template=id> appends a copy of the template to the rows and focuses it.
    var remover = event.target.closest("[data-remove-row]");
    if (remover) {
      var row = remover.closest(".rows-item");
      if (row) row.remove();
    }
    var adder = event.target.closest("[data-add-row]");
    if (adder) {
      var rows = document.getElementById(adder.getAttribute("data-rows"));
      var template = document.getElementById(adder.getAttribute("data-template"));
      if (rows && template) {
        rows.appendChild(template.content.cloneNode(true));
        var field = rows.lastElementChild && rows.lastElementChild.querySelector("textarea, input");
        if (field) field.focus();
      }
    }
  });
  // <input data-escape-clicks=".cancel">: Escape clicks that button of its form.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    var input = event.target.closest && event.target.closest("[data-escape-clicks]");
    if (!input || !input.form) return;
    var button = input.form.querySelector(input.getAttribute("data-escape-clicks"));
    if (button) { event.preventDefault(); button.click(); }
  });
  // <input data-focus-checks="#radio">: focusing it checks that radio.
  document.addEventListener("focusin", function (event) {
    var input = event.target.closest && event.target.closest("[data-focus-checks]");
    if (!input) return;
    var radio = document.querySelector(input.getAttribute("data-focus-checks"));
    if (radio) radio.checked = true;
  });
  // hx-trigger="every 3s" data-poll-paused-by=".rename-form": no refresh while such an element
  // is inside (it would be replaced mid-edit). A trigger filter would need eval, which the CSP forbids.
  document.body.addEventListener("htmx:confirm", function (event) {
    var elt = event.detail.elt;
    var selector = elt && elt.getAttribute && elt.getAttribute("data-poll-paused-by");
    if (selector && elt.querySelector(selector)) event.preventDefault();
  });

  window.Evalsite = { showToast: showToast };
})();
