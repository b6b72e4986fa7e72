// Keyboard-first review on the run page's cards and the review queue: j / k move between
// results, a agrees with the judge, o opens the override form, Escape closes it. Keys are
// ignored while typing in a field or with a modifier held. The review forms post with
// htmx (the control is swapped in place) and work without JavaScript.
(function () {
  "use strict";

  var ITEMS = "[data-review-item], li.result-card";

  // The override and "expected answer is wrong" forms are shown without JavaScript; with it
  // they fold behind their buttons (aria-expanded), here and in every control htmx swaps in.
  function setPanel(button, open) {
    var panel = document.getElementById(button.getAttribute("aria-controls"));
    if (!panel) return null;
    panel.hidden = !open;
    button.setAttribute("aria-expanded", open ? "true" : "false");
    button.classList.toggle("is-open", open);
    return panel;
  }

  function fold(root) {
    root.querySelectorAll("[data-review-toggle]").forEach(function (button) { setPanel(button, false); });
  }

  function toggleFor(panel) {
    return panel && document.querySelector('[data-review-toggle][aria-controls="' + panel.id + '"]');
  }

  function openOverride(item) {
    var panel = item.querySelector("[data-review-override]");
    var button = toggleFor(panel);
    if (!button) return;
    setPanel(button, true);
    var first = panel.querySelector("input[name=verdict]:checked") || panel.querySelector("input[name=verdict]");
    if (first) first.focus();
  }

  document.addEventListener("DOMContentLoaded", function () { fold(document); });
  document.body.addEventListener("htmx:load", function (event) { if (event.target.querySelectorAll) fold(event.target); });
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-review-toggle]");
    if (!button) return;
    var panel = setPanel(button, button.getAttribute("aria-expanded") !== "true");
    if (panel && !panel.hidden) {
      var field = panel.querySelector("input, textarea");
      if (field) field.focus();
    }
  });

  function items() {
    return Array.prototype.filter.call(document.querySelectorAll(ITEMS), function (item) {
      return item.querySelector("[data-review-control]");
    });
  }

  function current() {
    var active = document.activeElement;
    return active && active.closest ? active.closest(ITEMS) : null;
  }

  // On the run page a card is a <details>: the keyboard opens the card it moves to, and
  // closes the one it opened before (cards the reviewer opened by hand stay open).
  var openedByKeys = null;

  function openCard(item) {
    var details = item.querySelector("details.result-details");
    if (!details || details.open) return;
    if (openedByKeys && openedByKeys !== details) openedByKeys.open = false;
    details.open = true;
    openedByKeys = details;
  }

  function focusItem(item) {
    if (!item) return;
    openCard(item);
    if (!item.hasAttribute("tabindex")) item.setAttribute("tabindex", "-1");
    document.querySelectorAll(".is-review-focus").forEach(function (other) { other.classList.remove("is-review-focus"); });
    item.classList.add("is-review-focus");
    item.focus({ preventScroll: true });
    item.scrollIntoView({ block: "nearest" });
  }

  function move(step) {
    var list = items();
    if (!list.length) return;
    var index = list.indexOf(current());
    var next = index === -1 ? (step > 0 ? 0 : list.length - 1) : Math.min(list.length - 1, Math.max(0, index + step));
    focusItem(list[next]);
  }

  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "Escape") {
      var panel = document.activeElement && document.activeElement.closest && document.activeElement.closest("[data-review-panel]");
      var button = toggleFor(panel);
      if (button && !panel.hidden) {
        setPanel(button, false);
        focusItem(panel.closest(ITEMS));
        event.preventDefault();
      }
      return;
    }
    if (typing(event.target)) return;
    var item = current();
    if (event.key === "j") { move(1); event.preventDefault(); }
    else if (event.key === "k") { move(-1); event.preventDefault(); }
    else if (event.key === "a" && item) {
      var agree = item.querySelector("form[data-review-agree]");
      if (!agree) return;
      event.preventDefault();
      agree.requestSubmit();
      move(1);
    } else if (event.key === "o" && item) {
      event.preventDefault();
      openCard(item);
      openOverride(item);
    }
  });

  // A click inside a card makes it the current one, so keys continue from there.
  document.addEventListener("click", function (event) {
    var item = event.target.closest && event.target.closest(ITEMS);
    if (item && item.querySelector("[data-review-control]")) {
      document.querySelectorAll(".is-review-focus").forEach(function (other) { other.classList.remove("is-review-focus"); });
      item.classList.add("is-review-focus");
    }
  });

  // "Start with the first" on the queue focuses its first item.
  document.addEventListener("click", function (event) {
    var start = event.target.closest && event.target.closest("[data-review-start]");
    if (!start) return;
    event.preventDefault();
    focusItem(items()[0]);
  });

  // After an override is saved in place, keep the keyboard on its result.
  document.body.addEventListener("htmx:afterSwap", function (event) {
    var control = event.detail && event.detail.target;
    if (!control || !control.matches || !control.matches("[data-review-control]")) return;
    var item = document.getElementById(control.id);
    var holder = item && item.closest(ITEMS);
    if (holder && !current()) focusItem(holder);
  });
})();
