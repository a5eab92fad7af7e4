/* The data tables' browser side (gpuwatch/app/grid.py): link cells, totals row, CSV button. */
(function () {
  "use strict";

  function noUpdate() {
    return window.dash_clientside.no_update;
  }

  /* The totals row over the rows that pass the filters: columns marked total summed. */
  function totals(rows, columnDefs, options) {
    var columns = columnDefs || [];
    var summed = columns.filter(function (c) { return c.context && c.context.total; });
    if (!rows || !summed.length) {
      return noUpdate();
    }
    var row = {};
    var pinned = columns.filter(function (c) { return c.pinned; });
    var label = (pinned[0] || columns[0] || {}).field;
    if (label) {
      row[label] = "Total (" + rows.length + (rows.length === 1 ? " row)" : " rows)");
    }
    summed.forEach(function (c) {
      var sum = 0;
      rows.forEach(function (r) {
        var v = r[c.field];
        if (typeof v === "number" && isFinite(v)) {
          sum += v;
        }
      });
      row[c.field] = Math.round(sum * 100) / 100;
    });
    return Object.assign({}, options || {}, { pinnedBottomRowData: [row] });
  }

  function exportCsv(nClicks) {
    return nClicks ? true : noUpdate();
  }

  /* A CSV field: quoted, inner quotes doubled; text that starts like a formula neutralised
     (numbers as shown, "-$1,234.00" included, stay as they are). */
  var NUMBER = /^[-+]?\$?[0-9][0-9,]*(\.[0-9]+)?( ?%| GPU·h)?$/;
  function csvField(text, starts) {
    var value = text.replace(/\s+/g, " ").trim();
    if (!NUMBER.test(value)) {
      value = gwNeutralise(value, starts);
    }
    return '"' + value.replace(/"/g, '""') + '"';
  }

  /* A plain table's Export CSV (gpuwatch/app/grid.py exportable): the comment line, the
     headings and every row as shown, written as a file named by the button. */
  function exportTable(nClicks, buttonId) {
    var button = document.getElementById(buttonId);
    var table = button && document.getElementById(button.dataset.table);
    if (!nClicks || !table) {
      return noUpdate();
    }
    var starts = JSON.parse(button.dataset.starts || "[]");
    var lines = [button.dataset.comment];
    table.querySelectorAll("tr").forEach(function (tr) {
      if (tr.hidden) {
        return;
      }
      var cells = Array.prototype.map.call(tr.querySelectorAll("th, td"), function (cell) {
        return csvField(cell.innerText || "", starts);
      });
      lines.push(cells.join(","));
    });
    var blob = new Blob([lines.join("\r\n") + "\r\n"], { type: "text/csv;charset=utf-8" });
    var link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = button.dataset.file;
    document.body.appendChild(link);
    link.click();
    document.body.removeChild(link);
    window.setTimeout(function () { URL.revokeObjectURL(link.href); }, 60000);
    return noUpdate();
  }

  /* Plain tables (gpuwatch/app/components.py html_table): a heading's button sorts the rows
     by its column, up then down; numbers as numbers ("$1,234.50", "12.5 %"), text in
     natural order, empty cells last. The filter box beside the Export button (id: the
     table's, then "-filter") shows the rows
     whose text holds what is typed, any case. Both act on the rows the page drew. */
  var SORT_NUMBER = /^[-+]?\$?[0-9][0-9,]*(\.[0-9]+)?/;
  /* A cell's text, and its number when its first word is one (a date is text). */
  function sortKey(cell) {
    var text = cell ? (cell.innerText || "").replace(/\s+/g, " ").trim() : "";
    text = text === "\u2014" ? "" : text; /* the dash of a missing value sorts as empty */
    var found = SORT_NUMBER.exec(text);
    var whole = found && found[0].length === text.split(" ")[0].length;
    return { text: text, number: whole ? parseFloat(found[0].replace(/[$,+]/g, "")) : NaN };
  }
  function compareKeys(a, b) {
    if (!isNaN(a.number) && !isNaN(b.number)) {
      return a.number - b.number;
    }
    return a.text.localeCompare(b.text, undefined, { numeric: true, sensitivity: "base" });
  }
  function sortBy(button) {
    var th = button.closest("th");
    var table = th && th.closest("table");
    if (!table || !table.tBodies.length) {
      return;
    }
    var column = Array.prototype.indexOf.call(th.parentElement.children, th);
    var up = th.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("thead th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", up ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.map.call(body.rows, function (row) {
      return { row: row, key: sortKey(row.cells[column]) };
    });
    rows.sort(function (a, b) {
      var empty = (a.key.text ? 0 : 1) - (b.key.text ? 0 : 1);
      return empty || (up ? 1 : -1) * compareKeys(a.key, b.key);
    });
    rows.forEach(function (r) { body.appendChild(r.row); });
  }
  function filterRows(box) {
    var table = document.getElementById(box.id.replace(/-filter$/, ""));
    if (!table || !table.tBodies.length) {
      return;
    }
    var needle = box.value.trim().toLowerCase();
    Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
      row.hidden = needle !== "" && (row.innerText || "").toLowerCase().indexOf(needle) < 0;
    });
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("table.gw-table th .gw-sort");
    if (button) {
      sortBy(button);
    }
  });
  document.addEventListener("input", function (event) {
    var box = event.target;
    if (box.tagName === "INPUT" && box.closest && box.closest(".gw-table-filter")) {
      filterRows(box);
    }
  });

  window.dash_clientside = Object.assign({}, window.dash_clientside, {
    gpuwatch: { totals: totals, exportCsv: exportCsv, exportTable: exportTable },
  });

  /* A cell whose row carries a link (cellRendererParams.hrefField): a Dash link, so the
     page changes without a reload; the totals row and rows without one show plain text. */
  function GwLink(props) {
    var field = props.hrefField || "href";
    var href = props.data && !props.node.rowPinned ? props.data[field] : null;
    var text = props.value == null ? "" : String(props.value);
    if (!href) {
      return text;
    }
    return window.React.createElement(window.dash_core_components.Link, {
      href: href,
      children: text,
      className: "gw-link",
    });
  }

  /* An exported text cell that starts like a formula (one of ``starts``, from the server:
     gpuwatch.analytics.render.FORMULA_START) gets a ' in front; numbers stay as they are. */
  function gwNeutralise(value, starts) {
    if (typeof value !== "string" || !value) {
      return value;
    }
    return starts.indexOf(value.charAt(0)) >= 0 ? "'" + value : value;
  }

  window.dashAgGridFunctions = Object.assign(
    {}, window.dashAgGridFunctions, { gwNeutralise: gwNeutralise }
  );

  window.dashAgGridComponentFunctions = Object.assign(
    {}, window.dashAgGridComponentFunctions, { GwLink: GwLink }
  );
})();
