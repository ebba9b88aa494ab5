// Runs in the page (the console's browser tests): what a screen-reader or low-vision
// user would trip over. Returns a list of problems; empty when none.
const problems = [];
const lum = (rgb) => {
  const [r, g, b] = rgb.map((c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
};
const parse = (text) => { const m = text.match(/rgba?\(([^)]+)\)/); if (!m) return null;
  const p = m[1].split(',').map(Number); return {rgb: p.slice(0, 3), a: p.length > 3 ? p[3] : 1}; };
const background = (el) => {
  for (let e = el; e; e = e.parentElement) {
    const c = parse(getComputedStyle(e).backgroundColor);
    if (c && c.a > 0) return c.rgb;
  }
  return [255, 255, 255];
};
if (!document.documentElement.lang) problems.push('html has no lang');
if (!document.title.trim()) problems.push('page has no title');
for (const landmark of ['header', 'nav', 'main', 'footer'])
  if (!document.querySelector(landmark)) problems.push('no ' + landmark + ' landmark');
if (document.querySelectorAll('h1').length !== 1) problems.push('not exactly one h1');
for (const control of document.querySelectorAll('input, select, textarea')) {
  const labelled = (control.id && document.querySelector('label[for="' + control.id + '"]'))
    || control.getAttribute('aria-label') || control.getAttribute('aria-labelledby');
  if (!labelled) problems.push('control without a label: ' + control.outerHTML.slice(0, 80));
}
for (const img of document.querySelectorAll('img')) if (!img.hasAttribute('alt')) problems.push('img without alt');
for (const svg of document.querySelectorAll('svg')) {
  const ids = (svg.getAttribute('aria-labelledby') || '').split(/\s+/).filter(Boolean);
  const named = svg.getAttribute('role') === 'img' && ids.length && ids.every((id) => document.getElementById(id));
  if (!named) problems.push('svg without role=img and a name');
}
for (const table of document.querySelectorAll('table'))
  if (!table.querySelector('caption') || !table.querySelector('th[scope]')) problems.push('table without caption or header scope');
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
let checked = 0;
while (walker.nextNode()) {
  const node = walker.currentNode; const el = node.parentElement;
  if (!node.textContent.trim() || !el || el.closest('svg')) continue;
  const style = getComputedStyle(el);
  if (style.visibility === 'hidden' || style.display === 'none' || el.getClientRects().length === 0) continue;
  const rect = el.getBoundingClientRect(); if (rect.right < 0 || rect.bottom < 0) continue;
  const fg = parse(style.color); if (!fg) continue;
  const [a, b] = [lum(fg.rgb), lum(background(el))];
  const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  checked += 1;
  if (ratio < 4.5) problems.push('contrast ' + ratio.toFixed(2) + ' for "' + node.textContent.trim().slice(0, 40) + '"');
}
if (checked === 0) problems.push('no text checked');
return problems;
