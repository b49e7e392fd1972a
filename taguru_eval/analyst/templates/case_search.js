// Search every case of the run, not only the rows the page lists: the cases
// section embeds all of them as one gzip-compressed, base64-encoded columnar JSON
// blob (case id, failing checks, lane outcome, per-case metrics), decoded the
// first time the search box is used (DecompressionStream: no library, no request).
// Until then, and where the browser cannot decode it, the page is as it was.
async function taguruCaseIndex(encoded) {
  var binary = atob(encoded);
  var bytes = new Uint8Array(binary.length);
  for (var i = 0; i < binary.length; i += 1) { bytes[i] = binary.charCodeAt(i); }
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return (await new Response(stream).json())[0];
}

// The rows whose case id (or failing checks) holds ``query``, case-insensitively,
// in the blob's order (worst first): {total, rows: [row indices, at most limit]}.
function taguruCaseSearch(index, query, limit) {
  var wanted = query.trim().toLowerCase();
  var ids = index.case_id;
  var fails = index.fails || [];
  var rows = [];
  var total = 0;
  if (!wanted) { return { total: 0, rows: rows }; }
  for (var i = 0; i < ids.length; i += 1) {
    if (String(ids[i]).toLowerCase().indexOf(wanted) >= 0 ||
        String(fails[i] || "").toLowerCase().indexOf(wanted) >= 0) {
      total += 1;
      if (rows.length < limit) { rows.push(i); }
    }
  }
  return { total: total, rows: rows };
}

(function () {
  if (typeof document === "undefined") { return; }
  var holder = document.getElementById("taguru-case-index");
  var input = document.getElementById("case-search");
  if (!holder || !input) { return; }
  var result = document.getElementById("case-search-result");
  var status = document.getElementById("case-search-status");
  var columns = JSON.parse(holder.getAttribute("data-columns"));
  var shown = 50;
  var loading = null;
  var timer = null;
  function cell(value) {
    var td = document.createElement("td");
    if (value === null || value === undefined) { td.textContent = "—"; td.className = "null"; }
    else if (typeof value === "number") { td.textContent = String(value); td.className = "num"; }
    else { td.textContent = String(value); }
    return td;
  }
  function render(index, found) {
    var body = result.querySelector("tbody");
    body.textContent = "";
    found.rows.forEach(function (row) {
      var tr = document.createElement("tr");
      columns.forEach(function (name) { tr.appendChild(cell(index[name][row])); });
      body.appendChild(tr);
    });
    result.hidden = found.rows.length === 0;
    status.textContent = found.total + " of " + index.case_id.length + " case(s) match" +
      (found.total > found.rows.length ? "; the first " + found.rows.length + " (worst first)" : "");
  }
  function search() {
    if (!loading) {
      status.textContent = "reading the case index…";
      loading = taguruCaseIndex(JSON.parse(holder.textContent));
    }
    loading.then(function (index) {
      render(index, taguruCaseSearch(index, input.value, shown));
    }).catch(function (error) {
      status.textContent = "this browser cannot read the case index (" + error +
        "); every case is in the Parquet file linked above";
    });
  }
  input.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(search, 150);
  });
  input.disabled = false;
})();
