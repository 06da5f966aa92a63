// rocketq console: light enhancements only; every page works without this file.
(function () {
  // Submit a filter form as soon as its select changes.
  document.querySelectorAll("select[data-autosubmit]").forEach(function (el) {
    el.addEventListener("change", function () { el.form.submit(); });
  });
  // Epoch milliseconds as local date and time.
  document.querySelectorAll("time[data-ms]").forEach(function (el) {
    var ms = Number(el.getAttribute("data-ms"));
    if (ms > 0) { el.textContent = new Date(ms).toLocaleString(); }
  });
})();
