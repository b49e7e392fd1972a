// Runs after the inlined bundle defined window.vegaEmbed; records how many
// marks each chart drew so a headless browser (and a reader) can check it.
(function () {
  var specs = JSON.parse(document.getElementById("taguru-specs").textContent);
  var options = JSON.parse(document.getElementById("taguru-embed-options").textContent);
  var done = 0;
  specs.forEach(function (entry, index) {
    var element = document.getElementById("chart-" + index);
    vegaEmbed(element, entry.spec, options).then(function () {
      var marks = element.querySelectorAll("g.role-mark > path, g.role-mark > rect, " +
        "g.role-mark > line, g.role-mark > g > path, g.role-mark > g > rect, " +
        "g.role-mark > g > line").length;
      element.setAttribute("data-marks", String(marks));
    }).catch(function (error) {
      element.setAttribute("data-marks", "error");
      element.textContent = "chart failed: " + error;
    }).finally(function () {
      done += 1;
      if (done === specs.length) { document.body.setAttribute("data-charts", "done"); }
    });
  });
  if (specs.length === 0) { document.body.setAttribute("data-charts", "done"); }
})();
