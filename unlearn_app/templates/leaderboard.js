// The leaderboard's index: a click on a column header sorts its table (by each cell's data-value, else its text);
// the family and method selects show only the rows whose data-family / data-method match. Static: no data in here.
function sortTable(th) {
  const table = th.closest('table');
  const i = Array.from(th.parentNode.children).indexOf(th);
  const asc = th.dataset.order !== 'asc';
  table.querySelectorAll('th').forEach(h => delete h.dataset.order);
  th.dataset.order = asc ? 'asc' : 'desc';
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const key = r => { const t = r.cells[i].dataset.value ?? r.cells[i].textContent; const n = parseFloat(t); return isNaN(n) ? t : n; };
  rows.sort((a, b) => {
    const x = key(a), y = key(b);
    const c = (typeof x === 'number' && typeof y === 'number') ? x - y : String(x).localeCompare(String(y));
    return asc ? c : -c;
  });
  rows.forEach(r => body.appendChild(r));
}
function applyFilters() {
  const f = document.getElementById('family').value, m = document.getElementById('method').value;
  document.querySelectorAll('tr[data-family]').forEach(r => { r.hidden = (f && r.dataset.family !== f) || (m && r.dataset.method !== m); });
}
document.querySelectorAll('table.board th').forEach(th => th.addEventListener('click', () => sortTable(th)));
document.getElementById('family').addEventListener('change', applyFilters);
document.getElementById('method').addEventListener('change', applyFilters);
