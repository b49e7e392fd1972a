// DataTables, from the itables wheel, is inlined as a JSON string (its own code holds
// an HTML comment opener and a script tag's name, which an inline script element
// cannot hold safely) and imported from a Blob URL; DataTables then sorts, searches and pages each table marked
// data-datatable. Until it has (or if it cannot), every table is the complete
// plain table the page already holds. body[data-tables] says how it went.
(async function () {
  try {
    var source = JSON.parse(document.getElementById("taguru-datatables-source").textContent);
    var options = JSON.parse(document.getElementById("taguru-datatables-options").textContent);
    var url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
    var DataTable = (await import(url)).default;
    URL.revokeObjectURL(url);
    document.querySelectorAll("table[data-datatable]").forEach(function (table) {
      new DataTable(table, options);
    });
    document.body.setAttribute("data-tables", "done");
  } catch (error) {
    document.body.setAttribute("data-tables", "error: " + error);
  }
})();
