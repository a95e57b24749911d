// Search results: the snippet under each hit is cut from the page's text, where equations are still raw TeX
// (MathJax typesets them only in a browser that shows the page). Replace every equation by "…" and drop the
// code cells' sources, so that a snippet reads as prose.
(function patchSearchSnippets(triesLeft) {
  if (typeof Search === "undefined" || !Search.htmlToText) {
    if (triesLeft > 0) setTimeout(() => patchSearchSnippets(triesLeft - 1), 50);
    return;
  }
  if (Search.ntkCorePatched) return;
  const original = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => {
    const doc = new DOMParser().parseFromString(htmlString, "text/html");
    doc.querySelectorAll(".math, mjx-container").forEach((el) => el.replaceWith(" … "));
    doc.querySelectorAll(".cell_input, .highlight").forEach((el) => el.remove());
    return original("<!DOCTYPE html>" + doc.documentElement.outerHTML, anchor);
  };
  Search.ntkCorePatched = true;
})(window.location.pathname.endsWith("search.html") ? 100 : 0);
