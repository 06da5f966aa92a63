// rocketq console: light enhancements only; every page works without this file.
(function () {
  // Submit a filter form as soon as its select changes.
  document.querySelectorAll("select[data-autosubmit]").forEach(function (el) {
    el.addEventListener("change", function () { el.form.submit(); });
  });
  // Epoch milliseconds as date and time in UTC, the zone the time fields are read in.
  document.querySelectorAll("time[data-ms]").forEach(function (el) {
    var ms = Number(el.getAttribute("data-ms"));
    if (ms > 0) {
      el.textContent = new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC");
    }
  });
})();
