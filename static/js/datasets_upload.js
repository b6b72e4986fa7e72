// The two-step upload form on the Generate Dataset page (templates/datasets/new.html).
// Without this script both steps show and the form still works; the server checks everything again.
// The drop zone itself is the shared upload control (static/js/file_drop.js).
(function () {
  "use strict";

  function formOf(node) { return node && node.closest && node.closest("[data-upload-steps]"); }

  function init(form) {
    if (!form || form.dataset.ready) return;
    form.dataset.ready = "1";
    form.classList.add("js-enabled");
    // The server says where to resume: "2" when only the name was refused (the file input is
    // kept across the swap by hx-preserve), "all" when the browser lost the file (a full page).
    var step = form.getAttribute("data-start-step") || "1";
    var input = form.querySelector("input[type=file]");
    if (input.files && input.files.length) chosen(form);
    if (step === "2" && !(input.files && input.files.length)) step = "all";
    show(form, step);
    if (step === "2") form.querySelector("input[name=name]").focus();
  }

  function show(form, step) {
    form.querySelectorAll("[data-step]").forEach(function (panel) {
      panel.hidden = step !== "all" && panel.getAttribute("data-step") !== step;
    });
    document.querySelectorAll("[data-step-indicator]").forEach(function (item) {
      var current = step === "all" ? "1" : step;
      item.classList.toggle("is-current", item.getAttribute("data-step-indicator") === current);
      item.classList.toggle("is-done", item.getAttribute("data-step-indicator") < current);
    });
  }

  function chosen(form) {
    var input = form.querySelector("input[type=file]");
    var file = input.files && input.files[0];
    var problem = window.evalsiteFileDrop.check(input);
    if (!file) {
      var error = form.querySelector("[data-file-error]");
      error.textContent = problem;
      error.hidden = !problem;
    }
    if (file && !problem) {
      form.querySelector("[data-source-name]").textContent = file.name;
      var name = form.querySelector("input[name=name]");
      if (!name.value) name.value = file.name.replace(/\.[^.]+$/, "").replace(/[_-]+/g, " ").trim().slice(0, 120);
    }
    return problem;
  }

  // htmx:load fires for the first page and for every swapped-in form (the new element, not the old one).
  document.addEventListener("htmx:load", function (event) {
    var elt = event.detail.elt;
    init(elt.matches && elt.matches("[data-upload-steps]") ? elt : elt.querySelector && elt.querySelector("[data-upload-steps]"));
  });
  document.addEventListener("DOMContentLoaded", function () {
    init(document.querySelector("[data-upload-steps]"));
  });

  document.addEventListener("change", function (event) {
    var form = formOf(event.target);
    if (form && event.target.type === "file") chosen(form);
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-step-go]");
    var form = formOf(button);
    if (!form) return;
    var step = button.getAttribute("data-step-go");
    if (step === "2" && chosen(form)) {
      form.querySelector("input[type=file]").focus();
      return;
    }
    show(form, step);
    var focus = step === "2" ? form.querySelector("input[name=name]") : form.querySelector("input[type=file]");
    if (focus) focus.focus();
  });
})();
