// The one upload control (templates/datasets/partials/file_drop.html): shows the chosen file and
// checks its kind (the input's accept list) and size before anything is sent. Loaded on every
// page (base.html) and delegated from the document, so controls inside dialogs work too.
// Other scripts call window.evalsiteFileDrop.check(input) and get "" or the problem.
(function () {
  "use strict";

  function extensions(input) {
    return (input.getAttribute("accept") || "").split(",")
      .map(function (item) { return item.trim().toLowerCase(); })
      .filter(function (item) { return item.charAt(0) === "."; });
  }

  function describe(list) {
    if (list.length < 2) return list.join("");
    return list.slice(0, -1).join(", ") + " or " + list[list.length - 1];
  }

  function problemOf(input, file) {
    if (!file) return input.required ? "Choose a file to upload." : "";
    var allowed = extensions(input);
    var dot = file.name.lastIndexOf(".");
    var extension = dot < 0 ? "" : file.name.slice(dot).toLowerCase();
    if (allowed.length && allowed.indexOf(extension) < 0) {
      return "“" + file.name + "” is not a " + describe(allowed) + " file. Choose one of those.";
    }
    if (file.size === 0) return "“" + file.name + "” is empty.";
    var max = parseInt(input.getAttribute("data-max-bytes"), 10);
    if (max && file.size > max) {
      return "“" + file.name + "” is " + (file.size / 1e6).toFixed(1) + " MB; the limit is " + (max / 1e6) + " MB.";
    }
    return "";
  }

  // Show the input's file (or its absence) in its drop zone; returns the problem, or "".
  function check(input) {
    var field = input.closest("[data-file-field]");
    var file = input.files && input.files[0];
    var problem = problemOf(input, file);
    if (!field) return problem;
    var shown = file ? problem : "";  // nothing chosen yet is not an error until the form says so
    var error = field.querySelector("[data-file-error]");
    error.textContent = shown;
    error.hidden = !shown;
    var label = field.querySelector("[data-file-label]");
    label.hidden = !file;
    if (file) label.textContent = file.name + " · " + (file.size / 1e6).toFixed(2) + " MB";
    var zone = field.querySelector("[data-dropzone]");
    zone.classList.toggle("has-file", !!file && !problem);
    zone.classList.toggle("has-error", !!shown || (!file && field.classList.contains("has-error")));
    if (file) {
      // A new choice replaces the server's verdict on the previous one.
      field.classList.toggle("has-error", !!problem);
      field.querySelectorAll(".errorlist:not([data-file-error])").forEach(function (list) { list.hidden = true; });
      if (problem) input.setAttribute("aria-invalid", "true"); else input.removeAttribute("aria-invalid");
    }
    return problem;
  }

  window.evalsiteFileDrop = { check: check };

  document.addEventListener("change", function (event) {
    var input = event.target;
    if (input.matches && input.matches("[data-file-field] input[type=file]")) check(input);
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
        var input = document.getElementById(zone.getAttribute("for"));
        input.files = event.dataTransfer.files;
        input.dispatchEvent(new Event("change", { bubbles: true }));
      }
    });
  });
})();
