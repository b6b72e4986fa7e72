// The two-step "Generate with AI" form (templates/datasets/partials/generate_tab.html).
// Without this script both steps show and the form still works; the server checks everything again.
(function () {
  "use strict";

  function formOf(node) { return node && node.closest && node.closest("[data-generate-steps]"); }

  function init(form) {
    if (!form || form.dataset.ready) return;
    form.dataset.ready = "1";
    form.classList.add("js-enabled");
    if (form.getAttribute("data-start-step") === "2") fillReview(form);
    show(form, form.getAttribute("data-start-step") || "1");
  }

  function show(form, step) {
    form.querySelectorAll("[data-step]").forEach(function (panel) {
      panel.hidden = panel.getAttribute("data-step") !== step;
    });
    document.querySelectorAll("[data-step-indicator]").forEach(function (item) {
      var number = item.getAttribute("data-step-indicator");
      item.classList.toggle("is-current", number === step);
      item.classList.toggle("is-done", number < step);
      if (number === step) item.setAttribute("aria-current", "step"); else item.removeAttribute("aria-current");
    });
  }

  function fillReview(form) {
    var count = parseInt(form.querySelector("input[name=count]").value, 10);
    form.querySelector("[data-review-count]").textContent = count + (count === 1 ? " test case" : " test cases");
    var instructions = form.querySelector("textarea[name=instructions]").value.trim();
    form.querySelector("[data-review-instructions]").textContent = instructions || "None: the whole configuration";
  }

  function goToReview(form) {
    var count = form.querySelector("input[name=count]");
    if (!count.checkValidity()) {
      count.reportValidity(); // the browser's own message: "Value must be less than or equal to 50."
      return;
    }
    fillReview(form);
    show(form, "2");
    form.querySelector("input[name=name]").focus();
  }

  document.addEventListener("DOMContentLoaded", function () {
    init(document.querySelector("[data-generate-steps]"));
  });
  document.body.addEventListener("htmx:afterSwap", function () {
    init(document.querySelector("[data-generate-steps]"));
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-generate-go]");
    var form = formOf(button);
    if (!form) return;
    if (button.getAttribute("data-generate-go") === "2") {
      goToReview(form);
    } else {
      show(form, "1");
      form.querySelector("input[name=count]").focus();
    }
  });

  // Enter in step 1 continues to the review instead of submitting a form whose name is still hidden.
  document.addEventListener("keydown", function (event) {
    var form = formOf(event.target);
    if (!form || event.key !== "Enter" || event.target.tagName !== "INPUT") return;
    var panel = event.target.closest("[data-step]");
    if (panel && panel.getAttribute("data-step") === "1" && form.classList.contains("js-enabled")) {
      event.preventDefault();
      goToReview(form);
    }
  });
})();
