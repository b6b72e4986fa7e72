// The two-step upload form on the Generate Dataset page (templates/datasets/new.html).
// Without this script both steps show and the form still works; the server checks everything again.
(function () {
  "use strict";

  var ALLOWED = ["pdf", "xlsx", "xls", "md", "markdown", "csv", "docx"];

  function formOf(node) { return node && node.closest && node.closest("[data-upload-steps]"); }

  function init(form) {
    if (!form || form.dataset.ready) return;
    form.dataset.ready = "1";
    form.classList.add("js-enabled");
    // After a server-side error the file is gone (browsers never keep it): show both steps.
    show(form, form.classList.contains("has-errors") ? "all" : "1");
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

  function fileProblem(form, file) {
    if (!file) return "Choose a file to upload.";
    var extension = (file.name.split(".").pop() || "").toLowerCase();
    if (file.name.indexOf(".") < 0 || ALLOWED.indexOf(extension) < 0) {
      return "This kind of file is not supported. Upload a PDF, XLSX, XLS, Markdown, CSV or DOCX file.";
    }
    if (file.size === 0) return "The submitted file is empty.";
    var max = parseInt(form.getAttribute("data-max-bytes"), 10);
    if (file.size > max) {
      return "The file is " + (file.size / 1e6).toFixed(1) + " MB; the limit is " + (max / 1e6) + " MB.";
    }
    return "";
  }

  function chosen(form) {
    var input = form.querySelector("input[type=file]");
    var file = input.files && input.files[0];
    var problem = fileProblem(form, file);
    var error = form.querySelector("[data-file-error]");
    error.textContent = problem;
    error.hidden = !problem;
    var label = form.querySelector("[data-file-label]");
    label.hidden = !file;
    if (file) label.textContent = file.name + " · " + (file.size / 1e6).toFixed(2) + " MB";
    var zone = form.querySelector("[data-dropzone]");
    zone.classList.toggle("has-file", !!file && !problem);
    zone.classList.toggle("has-error", !!file && !!problem);
    if (file && !problem) {
      form.querySelector("[data-source-name]").textContent = file.name;
      var name = form.querySelector("input[name=name]");
      if (!name.value) name.value = file.name.replace(/\.[^.]+$/, "").replace(/[_-]+/g, " ").trim().slice(0, 120);
    }
    return problem;
  }

  document.addEventListener("DOMContentLoaded", function () {
    init(document.querySelector("[data-upload-steps]"));
  });
  document.body.addEventListener("htmx:afterSwap", function (event) {
    init(event.detail.elt.matches && event.detail.elt.matches("[data-upload-steps]") ? event.detail.elt
      : document.querySelector("[data-upload-steps]"));
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

  // Dropping a file on the zone fills the file input, as choosing it would.
  ["dragenter", "dragover"].forEach(function (type) {
    document.addEventListener(type, function (event) {
      var zone = event.target.closest && event.target.closest("[data-dropzone]");
      if (!zone) return;
      event.preventDefault();
      zone.classList.add("dragover");
    });
  });
  ["dragleave", "drop"].forEach(function (type) {
    document.addEventListener(type, function (event) {
      var zone = event.target.closest && event.target.closest("[data-dropzone]");
      if (!zone) return;
      event.preventDefault();
      zone.classList.remove("dragover");
      if (type === "drop" && event.dataTransfer && event.dataTransfer.files.length) {
        var input = formOf(zone).querySelector("input[type=file]");
        input.files = event.dataTransfer.files;
        input.dispatchEvent(new Event("change", { bubbles: true }));
      }
    });
  });
})();
